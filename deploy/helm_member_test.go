// The members' Helm values (deploy/helm/coredns-member1.values.yaml) for
// the CoreDNS project's own chart, rendered with that chart as helm
// template does and held to what deploy/overlays/member1 makes, object by
// object. The chart is not ours and is not in the repository: the tests
// read it from MCS_COREDNS_CHART, else from ../shared beside the clone,
// and fail, saying so, where it is neither.

package deploy_test

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy/caddyfile"
	gocmp "github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

const (
	memberValuesFile = "helm/coredns-member1.values.yaml"
	// coreDNSChartEnv names the CoreDNS chart's directory (its Chart.yaml
	// in it); relative paths are from the repository's root.
	coreDNSChartEnv = "MCS_COREDNS_CHART"
	// defaultCoreDNSChart is where it is beside the clone, from the root.
	defaultCoreDNSChart = "../shared/coredns-helm-chart/coredns"
	// coreDNSChartVersion is the chart the values are written for and
	// docs/install.md installs.
	coreDNSChartVersion = "1.46.2"
	// memberRelease is the release docs/install.md installs: coredns in
	// kube-system, whose objects are then named as kubeadm's.
	memberRelease, memberNamespace = "coredns", "kube-system"
)

// loadCoreDNSChart loads the CoreDNS project's chart, or fails saying
// where it looked and how to point at it.
func loadCoreDNSChart(t *testing.T) *chart.Chart {
	t.Helper()
	dir, from := os.Getenv(coreDNSChartEnv), coreDNSChartEnv
	if dir == "" {
		dir, from = defaultCoreDNSChart, coreDNSChartEnv+" unset: the default, beside the clone"
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", dir) // the tests run in deploy/
	}
	chrt, err := loader.Load(dir)
	if err != nil {
		t.Fatalf("the CoreDNS chart %s is not at %s (%s): %v\n"+
			"get it (helm pull coredns --repo https://coredns.github.io/helm --version %s --untar) and point at it: %s=$PWD/coredns",
			coreDNSChartVersion, dir, from, err, coreDNSChartVersion, coreDNSChartEnv)
	}
	if v := chrt.Metadata.Version; chrt.Metadata.Name != "coredns" || v != coreDNSChartVersion {
		t.Fatalf("%s holds chart %s %s, want coredns %s, which the values are written for", dir, chrt.Metadata.Name, v, coreDNSChartVersion)
	}
	return chrt
}

// memberValues are the values file as helm -f reads it: a null stays
// null, which removes the chart's default.
func memberValues(t *testing.T) map[string]any {
	t.Helper()
	vals, err := chartutil.ReadValuesFile(memberValuesFile)
	if err != nil {
		t.Fatalf("%s: %v", memberValuesFile, err)
	}
	return vals
}

// renderMemberChart is helm template of the CoreDNS chart with the
// members' values, released as docs/install.md installs it.
func renderMemberChart(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun = true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = memberRelease, memberNamespace, labKube
	rel, err := install.Run(loadCoreDNSChart(t), memberValues(t))
	if err != nil {
		t.Fatalf("helm template of the CoreDNS chart with %s: %v", memberValuesFile, err)
	}
	return decodeManifests(t, rel.Manifest)
}

// The chart makes exactly these objects with the values, each held to its
// overlay's counterpart by a test below; the overlay's Service is
// kubeadm's kube-dns, which it leaves in place.
func TestMemberChartObjects(t *testing.T) {
	var got []string
	for _, u := range renderMemberChart(t) {
		got = append(got, objectKey(u))
	}
	slices.Sort(got)
	want := []string{
		"ClusterRole coredns", "ClusterRoleBinding coredns", "ConfigMap kube-system/coredns", "Deployment kube-system/coredns",
		"PodDisruptionBudget kube-system/coredns", "Service kube-system/kube-dns", "ServiceAccount kube-system/coredns",
	}
	if !slices.Equal(got, want) {
		t.Errorf("the CoreDNS chart with %s makes %v, want %v", memberValuesFile, got, want)
	}
}

// The chart's Corefile is member1's, corefile/Corefile, token for token:
// the same server block, the mcs stanza naming member1 and every stock
// plugin.
func TestMemberChartCorefile(t *testing.T) {
	got, _, _ := unstructured.NestedString(find(t, renderMemberChart(t), "ConfigMap", "coredns").Object, "data", "Corefile")
	want, _, _ := unstructured.NestedString(find(t, render(t, "overlays/member1"), "ConfigMap", "coredns").Object, "data", "Corefile")
	if g, w := serverBlocks(t, memberValuesFile, got), serverBlocks(t, "overlays/member1", want); g != w {
		t.Errorf("the chart's Corefile\n%s\nhas the blocks\n%s\nwant overlays/member1's\n%s", got, g, w)
	}
	if !strings.Contains(got, "cluster member1\n") {
		t.Errorf("the chart's Corefile names no cluster:\n%s", got)
	}
}

// serverBlocks is a Corefile as CoreDNS parses it: its server blocks'
// keys and each directive's tokens, without comments or layout.
func serverBlocks(t *testing.T, name, corefile string) string {
	t.Helper()
	j, err := caddyfile.ToJSON([]byte(corefile))
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, corefile)
	}
	return string(j)
}

// podView is what a CoreDNS Deployment runs, with Kubernetes' defaults
// filled in and probes' named ports resolved, so that the chart's and the
// overlay's compare field by field. Left out, by design (docs/install.md,
// "Installing with Helm"): labels, annotations and selectors, which name
// the release; the ports' names, which the chart derives from protocol and
// number (udp-53, tcp-53, tcp-9153) where kubeadm names them dns, dns-tcp
// and metrics; the probe ports the overlay declares (8080, 8181), which
// the probes reach all the same.
type podView struct {
	Replicas       int32
	Strategy       appsv1.DeploymentStrategy
	Priority       string
	ServiceAccount string
	DNSPolicy      corev1.DNSPolicy
	Grace          int64
	Affinity       *corev1.Affinity
	Tolerations    []corev1.Toleration
	NodeSelector   map[string]string
	PodSecurity    *corev1.PodSecurityContext
	Volumes        []corev1.Volume
	Image          string
	PullPolicy     corev1.PullPolicy
	Args           []string
	Env            []corev1.EnvVar
	Resources      corev1.ResourceRequirements
	Ports          []portView
	Mounts         []corev1.VolumeMount
	Liveness       *corev1.Probe
	Readiness      *corev1.Probe
	Security       *corev1.SecurityContext
}

// portView is a container or Service port by protocol and number.
type portView struct {
	Protocol corev1.Protocol
	Port     int32
}

// viewPod is d's podView. Its one container's configMap mount is
// read-only whatever it says: the kubelet mounts configMap volumes so.
func viewPod(t *testing.T, d *appsv1.Deployment) podView {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("Deployment %s runs %d containers, want 1", d.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	v := podView{
		Replicas: *d.Spec.Replicas, Strategy: d.Spec.Strategy, Priority: spec.PriorityClassName, ServiceAccount: spec.ServiceAccountName,
		DNSPolicy: spec.DNSPolicy, Grace: 30, Affinity: spec.Affinity, Tolerations: spec.Tolerations, NodeSelector: spec.NodeSelector,
		PodSecurity: spec.SecurityContext, Volumes: spec.Volumes, Image: c.Image, PullPolicy: c.ImagePullPolicy, Args: c.Args, Env: c.Env,
		Resources: c.Resources, Mounts: slices.Clone(c.VolumeMounts), Security: c.SecurityContext,
		Liveness: probeView(c, c.LivenessProbe), Readiness: probeView(c, c.ReadinessProbe),
	}
	if spec.TerminationGracePeriodSeconds != nil {
		v.Grace = *spec.TerminationGracePeriodSeconds
	}
	if ru := v.Strategy.RollingUpdate; ru != nil && ru.MaxSurge == nil {
		ru.MaxSurge = &intstr.IntOrString{Type: intstr.String, StrVal: "25%"}
	}
	for i := range v.Mounts {
		v.Mounts[i].ReadOnly = true
	}
	for _, p := range c.Ports {
		if p.Name != "liveness-probe" && p.Name != "readiness-probe" {
			v.Ports = append(v.Ports, portView{p.Protocol, p.ContainerPort})
		}
	}
	slices.SortFunc(v.Ports, comparePorts)
	return v
}

func comparePorts(a, b portView) int {
	return cmp.Or(cmp.Compare(a.Port, b.Port), cmp.Compare(a.Protocol, b.Protocol))
}

// probeView is p with Kubernetes' defaults and its port by number.
func probeView(c corev1.Container, p *corev1.Probe) *corev1.Probe {
	if p == nil {
		return nil
	}
	p = p.DeepCopy()
	for field, def := range map[*int32]int32{&p.PeriodSeconds: 10, &p.TimeoutSeconds: 1, &p.SuccessThreshold: 1, &p.FailureThreshold: 3} {
		if *field == 0 {
			*field = def
		}
	}
	if h := p.HTTPGet; h != nil && h.Port.Type == intstr.String {
		for _, cp := range c.Ports {
			if cp.Name == h.Port.StrVal {
				h.Port = intstr.FromInt32(cp.ContainerPort)
			}
		}
	}
	return p
}

// The chart's Deployment runs what the overlay's does: image, replicas,
// strategy, resources (no CPU limit), env, ports (TCP/53 too), probes,
// account, priority, DNS policy, anti-affinity, tolerations, node
// selector, security contexts and the Corefile's volume.
func TestMemberChartDeployment(t *testing.T) {
	got := viewPod(t, typed[appsv1.Deployment](t, renderMemberChart(t), "Deployment", "coredns"))
	want := viewPod(t, typed[appsv1.Deployment](t, render(t, "overlays/member1"), "Deployment", "coredns"))
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("the chart's Deployment differs from overlays/member1's (-overlay +chart):\n%s", diff)
	}
}

// The chart's Service kube-dns serves DNS over UDP and TCP on 53, to the
// container's port 53 of the chart's pods: the ports the overlay's
// container declares for DNS (dns, dns-tcp), which kubeadm's kube-dns
// serves.
func TestMemberChartService(t *testing.T) {
	objs := renderMemberChart(t)
	svc := typed[corev1.Service](t, objs, "Service", "kube-dns")
	pod := typed[appsv1.Deployment](t, objs, "Deployment", "coredns").Spec.Template
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(svc.Spec.Selector) == 0 {
		t.Errorf("the chart's Service selects %v, not its pods labelled %v", svc.Spec.Selector, pod.Labels)
	}
	var got []portView
	for _, p := range svc.Spec.Ports {
		if p.TargetPort.IntValue() != int(p.Port) {
			t.Errorf("the chart's Service port %s sends %d to %s", p.Name, p.Port, p.TargetPort.String())
		}
		got = append(got, portView{p.Protocol, p.Port})
	}
	var want []portView
	for _, p := range typed[appsv1.Deployment](t, render(t, "overlays/member1"), "Deployment", "coredns").Spec.Template.Spec.Containers[0].Ports {
		if p.Name == "dns" || p.Name == "dns-tcp" {
			want = append(want, portView{p.Protocol, p.ContainerPort})
		}
	}
	slices.SortFunc(got, comparePorts)
	slices.SortFunc(want, comparePorts)
	if !slices.Equal(got, want) {
		t.Errorf("the chart's Service serves %v, want the overlay's DNS ports %v", got, want)
	}
}

// CoreDNS installed by the chart may do what the overlay's system:coredns
// lets it, every rule but the ClusterProperty's, which mcs reads only when
// the Corefile names no cluster (TestMemberChartCorefile: it names
// member1), under the account coredns in kube-system, which the Role
// coredns-mcs (deploy/member/coredns-rbac.yaml, applied beside the chart)
// binds.
func TestMemberChartRBAC(t *testing.T) {
	objs, overlay := renderMemberChart(t), render(t, "overlays/member1")
	role := typed[rbacv1.ClusterRole](t, objs, "ClusterRole", "coredns")
	binding := typed[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "coredns")
	account := typed[corev1.ServiceAccount](t, objs, "ServiceAccount", "coredns")
	pod := typed[appsv1.Deployment](t, objs, "Deployment", "coredns").Spec.Template.Spec
	for _, r := range typed[rbacv1.ClusterRole](t, overlay, "ClusterRole", "system:coredns").Rules {
		if slices.Contains(r.Resources, "clusterproperties") {
			continue
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					if !grantsAll(role.Rules, g, res, verb) {
						t.Errorf("the chart's ClusterRole does not grant %s of %s.%s, which the overlay's system:coredns does", verb, res, g)
					}
				}
			}
		}
	}
	self := rbacv1.Subject{Kind: "ServiceAccount", Name: account.Name, Namespace: account.Namespace}
	if binding.RoleRef.Name != role.Name || !slices.Equal(binding.Subjects, []rbacv1.Subject{self}) || pod.ServiceAccountName != account.Name {
		t.Errorf("the chart binds %s to %v and runs its pods as %s, want its ClusterRole bound to %v, its pods' account", binding.RoleRef.Name, binding.Subjects, pod.ServiceAccountName, self)
	}
	mcsBinding := typed[rbacv1.RoleBinding](t, overlay, "RoleBinding", "coredns-mcs")
	if !slices.Equal(mcsBinding.Subjects, []rbacv1.Subject{self}) {
		t.Errorf("the Role coredns-mcs binds %v, not the chart's account %v", mcsBinding.Subjects, self)
	}
}

// grantsAll reports whether one of rules grants verb on every object of
// resource in group.
func grantsAll(rules []rbacv1.PolicyRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool {
		return slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && len(r.ResourceNames) == 0 && slices.Contains(r.Verbs, verb)
	})
}

// The chart's PodDisruptionBudget is the overlay's, for the chart's pods.
func TestMemberChartDisruptionBudget(t *testing.T) {
	objs := renderMemberChart(t)
	got := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "coredns")
	want := typed[policyv1.PodDisruptionBudget](t, render(t, "overlays/member1"), "PodDisruptionBudget", "coredns")
	pod := typed[appsv1.Deployment](t, objs, "Deployment", "coredns").Spec.Template
	selector, err := metav1.LabelSelectorAsSelector(got.Spec.Selector)
	if err != nil || selector.Empty() || !selector.Matches(labels.Set(pod.Labels)) {
		t.Errorf("the chart's budget selects %v (%v), not its pods labelled %v", got.Spec.Selector, err, pod.Labels)
	}
	got.Spec.Selector, want.Spec.Selector = nil, nil
	if diff := gocmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("the chart's PodDisruptionBudget differs from the overlay's (-overlay +chart):\n%s", diff)
	}
}
