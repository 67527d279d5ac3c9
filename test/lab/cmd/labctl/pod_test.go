package main

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEntrypoint(t *testing.T) {
	s := standIns("/repo")
	for image, want := range map[string][]string{
		"alpine/socat:1.7.4.4":                                {"socat"},
		"docker.io/alpine/socat@sha256:0123":                  {"socat"},
		"nicolaka/netshoot:v0.15":                             nil,
		"registry.example.com/coredns-mcs/coredns-mcs:latest": {"/repo/bin/coredns-mcs"},
		"localhost:5000/coredns-mcs/coredns-mcs":              {"/repo/bin/coredns-mcs"},
		"registry.example/coredns-mcs:lab":                    {"kwok's"},
		"registry.k8s.io/pause:3.10":                          {"kwok's"},
		"registry.example.com/not-alpine/socat-and-more:1":    {"kwok's"},
	} {
		got, ok := entrypoint(s, image)
		if !ok {
			got = []string{"kwok's"}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: entrypoint %q, want %q", image, got, want)
		}
	}
}

// TestContainerCommand checks the command line and environment a
// container gets, as a kubelet makes them: the downward API's addresses,
// $(VAR) expanded in args and in later variables, and the image's
// entrypoint when the container has no command.
func TestContainerCommand(t *testing.T) {
	k := &kubelet{cluster: clusters[1]}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Status:     corev1.PodStatus{PodIP: "10.10.0.7", PodIPs: []corev1.PodIP{{IP: "10.10.0.7"}, {IP: "fd00::7"}}},
	}
	c := corev1.Container{
		Args: []string{"-c", "echo $(IPS) $(MISSING) $$(IPS)"},
		Env: []corev1.EnvVar{
			{Name: "IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIPs"}}},
			{Name: "GREETING", Value: "pod $(IPS) in $(KUBERNETES_SERVICE_HOST)"},
		},
	}
	vars := k.containerEnv(pod, c)
	env := environ(vars)
	for _, want := range []string{"IPS=10.10.0.7,fd00::7", "GREETING=pod 10.10.0.7,fd00::7 in 127.0.11.1", "KUBERNETES_SERVICE_PORT=6443", "HOSTNAME=p"} {
		if !slices.Contains(env, want) {
			t.Errorf("environment %q lacks %q", env, want)
		}
	}
	argv := containerArgv([]string{"/bin/sh"}, c, vars)
	if want := []string{"/bin/sh", "-c", "echo 10.10.0.7,fd00::7 $(MISSING) $(IPS)"}; !slices.Equal(argv, want) {
		t.Errorf("argv %q, want %q", argv, want)
	}
	c.Command = []string{"socat"}
	if argv := containerArgv([]string{"/bin/sh"}, c, vars); argv[0] != "socat" {
		t.Errorf("a container's command comes before the image's entrypoint: %q", argv)
	}
}
