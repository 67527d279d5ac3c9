//go:build lab

package labtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// TestPodsRun checks what the MCS API conformance suite needs of the
// lab: pods of its images run their commands (with the downward API's
// addresses), resolve names through coredns-mcs as member1's kube-dns, reach
// each other through kube-proxy, answer exec with output and exit code,
// and stop when deleted.
func TestPodsRun(t *testing.T) {
	l := labtest.Get(t)
	labtest.ClusterDNS(t, labtest.Member1)
	ns := l.Namespace(t, labtest.Member1)
	pods := l.Client(t, labtest.Member1).CoreV1().Pods(ns)
	server := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello", Labels: map[string]string{"app": "hello"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "hello", Image: "alpine/socat:1.7.4.4", Command: []string{"/bin/sh"},
			Args: []string{"-c", `socat TCP-LISTEN:42,crlf,reuseaddr,fork SYSTEM:"echo pod ip $(MY_POD_IPS) $MY_POD_IPS"`},
			Env:  []corev1.EnvVar{{Name: "MY_POD_IPS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIPs"}}}},
		}}},
	}
	client := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "request"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "request", Image: "nicolaka/netshoot:v0.15", Args: []string{"/bin/sh", "-ec", "while :; do sleep 5; done"},
		}}},
	}
	service := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hello"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "hello"}, Ports: []corev1.ServicePort{{Port: 42}}},
	}
	l.Apply(t, labtest.Member1, server, client, service)
	serverIP := podIP(t, l, ns, "hello")
	podIP(t, l, ns, "request")
	clusterIP := l.ClusterIP(t, labtest.Member1, ns, "hello", time.Minute)

	exec := func(ctx context.Context, cmd string) (string, int, error) {
		return l.Exec(ctx, t, labtest.Member1, ns, "request", "sh", "-c", cmd)
	}
	want := func(cmd, substr string) {
		t.Helper()
		labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
			out, code, err := exec(ctx, cmd)
			if err != nil || code != 0 || !strings.Contains(out, substr) {
				return fmt.Errorf("%q: exit %d, %v: %q, want %q in it", cmd, code, err, out, substr)
			}
			return nil
		})
	}
	want("cat /etc/resolv.conf", "search "+ns+".svc.cluster.local svc.cluster.local cluster.local")
	want("nslookup hello."+ns+".svc.cluster.local.", clusterIP)
	// The name, as the pod's resolver completes it, through kube-proxy to
	// the server, whose reply shows the downward API's address both ways
	// a container gets it: $(VAR) in its args, and its environment.
	want("echo hi | nc -w 2 hello 42", "pod ip "+serverIP+" "+serverIP)

	out, code, err := exec(t.Context(), "echo failing >&2; exit 3")
	if err != nil || code != 3 || !strings.Contains(out, "failing") {
		t.Errorf("exit 3: got exit %d, %v, output %q", code, err, out)
	}

	if err := pods.Delete(t.Context(), "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		out, code, err := exec(ctx, "nc -z -w 1 "+serverIP+" 42")
		if err != nil || code == 0 {
			return fmt.Errorf("the deleted pod's server still answers: exit %d, %v: %q", code, err, out)
		}
		return nil
	})
}

// podIP waits until pod ns/name of member1 has an address and returns it.
func podIP(t *testing.T, l *labtest.Lab, ns, name string) string {
	t.Helper()
	var ip string
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		p, err := l.Client(t, labtest.Member1).CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ip = p.Status.PodIP; ip == "" || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s: %s, address %q", name, p.Status.Phase, ip)
		}
		return nil
	})
	return ip
}
