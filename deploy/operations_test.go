// The operations kit of the overlays and components: disruption budgets,
// spread, the NetworkPolicy, and what the monitors select.

package deploy_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// withComponents are the examples that add deploy/components to an overlay,
// and the lab cluster that plays the cluster each is for. They are not
// among overlays: the monitoring components need the Prometheus Operator's
// CRDs, which the lab does not have.
var withComponents = []overlay{
	{"examples/hub-with-components", "hub"},
	{"examples/member1-with-components", "member1"},
}

// prometheusOperator is the API group of ServiceMonitor, PodMonitor and
// PrometheusRule.
const prometheusOperator = "monitoring.coreos.com"

// typed finds the rendered object of that kind and name and converts it.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, kind, name).Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return out
}

// selects reports whether sel, a label selector, matches set.
func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(set))
}

// Applying a base overlay needs no Prometheus Operator: its kinds come
// only with the opt-in components.
func TestBaseOverlaysNeedNoPrometheusOperator(t *testing.T) {
	for _, o := range overlays {
		for _, u := range render(t, o.dir) {
			if u.GroupVersionKind().Group == prometheusOperator {
				t.Errorf("%s renders %s %s, which needs the Prometheus Operator's CRDs", o.dir, u.GetKind(), u.GetName())
			}
		}
	}
}

// A node drain evicts one replica of the controller, and of CoreDNS, at a
// time and never the last one, and is not held up by a replica that is not
// ready.
func TestDisruptionBudgets(t *testing.T) {
	for _, c := range []struct{ dir, deployment, budget string }{
		{"overlays/hub", "mcs-controller", "mcs-controller"},
		{"overlays/member1", "coredns", "coredns"},
	} {
		objs := render(t, c.dir)
		d := typed[appsv1.Deployment](t, objs, "Deployment", c.deployment)
		pdb := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", c.budget)
		replicas := int(*d.Spec.Replicas)
		unavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
		if err != nil || unavailable != 1 || replicas < 2 {
			t.Errorf("%s: %d replicas, the budget lets %d (%v) be evicted at once; want 1 of at least 2", c.dir, replicas, unavailable, err)
		}
		if pdb.GetNamespace() != d.GetNamespace() || !selects(t, pdb.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("%s: the budget %s/%s selects %v, not the pods of Deployment %s/%s (%v)",
				c.dir, pdb.GetNamespace(), pdb.GetName(), pdb.Spec.Selector, d.GetNamespace(), d.GetName(), d.Spec.Template.Labels)
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
			t.Errorf("%s: unhealthyPodEvictionPolicy %v, want AlwaysAllow", c.dir, p)
		}
	}
}

// The controller's replicas are spread over nodes and zones, and a hub of
// one node or one zone still runs both.
func TestControllerSpread(t *testing.T) {
	d := typed[appsv1.Deployment](t, render(t, "overlays/hub"), "Deployment", "mcs-controller")
	var keys []string
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 || !selects(t, c.LabelSelector, d.Spec.Template.Labels) {
			t.Errorf("spread over %s: maxSkew %d, %s, selector %v; want 1, ScheduleAnyway, the controller's pods",
				c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable, c.LabelSelector)
		}
		keys = append(keys, c.TopologyKey)
	}
	slices.Sort(keys)
	if want := []string{corev1.LabelHostname, corev1.LabelTopologyZone}; !slices.Equal(keys, want) {
		t.Errorf("spread over %v, want %v", keys, want)
	}
}

// port is a protocol and a port as a NetworkPolicy names it.
type port struct {
	protocol corev1.Protocol
	port     string
}

// ports are the ports of a NetworkPolicy rule, with the API's defaults:
// TCP, and every port.
func ports(ps []networkingv1.NetworkPolicyPort) []port {
	var out []port
	for _, p := range ps {
		pp := port{corev1.ProtocolTCP, "every port"}
		if p.Protocol != nil {
			pp.protocol = *p.Protocol
		}
		if p.Port != nil {
			pp.port = p.Port.String()
		}
		out = append(out, pp)
	}
	return out
}

// The controller's NetworkPolicy: in, only its HTTP port (metrics and
// probes); out, only API servers (ports 443 and 6443, anywhere: members are
// outside the cluster) and the cluster's DNS pods.
func TestControllerNetworkPolicy(t *testing.T) {
	objs := render(t, "examples/hub-with-components")
	d := typed[appsv1.Deployment](t, objs, "Deployment", "mcs-controller")
	np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "mcs-controller")
	if np.GetNamespace() != d.GetNamespace() || !selects(t, &np.Spec.PodSelector, d.Spec.Template.Labels) {
		t.Fatalf("the NetworkPolicy %s/%s selects %v, not the controller's pods", np.GetNamespace(), np.GetName(), np.Spec.PodSelector)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policy types %v, want both: the policy must restrict what comes in and what goes out", np.Spec.PolicyTypes)
	}
	c := d.Spec.Template.Spec.Containers[0]
	probed := []string{c.LivenessProbe.HTTPGet.Port.String(), c.ReadinessProbe.HTTPGet.Port.String()}
	metrics := find(t, objs, "Service", "mcs-controller-metrics")
	target, _, _ := unstructured.NestedSlice(metrics.Object, "spec", "ports")
	served := append(probed, target[0].(map[string]any)["targetPort"].(string))
	in := np.Spec.Ingress
	if len(in) != 1 {
		t.Fatalf("%d ingress rules, want one: metrics and probes", len(in))
	}
	if in[0].From != nil || !slices.Equal(ports(in[0].Ports), []port{{corev1.ProtocolTCP, "http"}}) ||
		slices.ContainsFunc(served, func(p string) bool { return p != "http" }) {
		t.Errorf("ingress from %v to %v; want from anywhere to the port named http alone, which the probes and the metrics Service use (%v)",
			in[0].From, ports(in[0].Ports), served)
	}
	dns := typed[appsv1.Deployment](t, render(t, "coredns-kubeadm"), "Deployment", "coredns")
	var apiServers, toDNS []port
	for _, rule := range np.Spec.Egress {
		switch {
		case rule.To == nil:
			apiServers = append(apiServers, ports(rule.Ports)...)
		case len(rule.To) == 1 && selects(t, rule.To[0].NamespaceSelector, map[string]string{corev1.LabelMetadataName: dns.GetNamespace()}) &&
			selects(t, rule.To[0].PodSelector, dns.Spec.Template.Labels):
			toDNS = append(toDNS, ports(rule.Ports)...)
		default:
			t.Errorf("egress to %v: neither any API server nor the cluster's DNS pods", rule.To)
		}
	}
	if want := []port{{corev1.ProtocolTCP, "443"}, {corev1.ProtocolTCP, "6443"}}; !slices.Equal(apiServers, want) {
		t.Errorf("egress to any address on %v, want exactly the API servers' ports %v", apiServers, want)
	}
	if want := []port{{corev1.ProtocolUDP, "53"}, {corev1.ProtocolTCP, "53"}}; !slices.Equal(toDNS, want) {
		t.Errorf("egress to the DNS pods on %v, want %v", toDNS, want)
	}
}

// The ServiceMonitor scrapes the controller's metrics Service, and the
// PodMonitor CoreDNS's metrics port, as the overlays render them and as
// the CoreDNS chart renders it with the members' values
// (helm_member_test.go), which names the port otherwise.
func TestMonitorsFindTheirTargets(t *testing.T) {
	hubObjs := render(t, "examples/hub-with-components")
	svc := typed[corev1.Service](t, hubObjs, "Service", "mcs-controller-metrics")
	var svcPorts []string
	for _, p := range svc.Spec.Ports {
		svcPorts = append(svcPorts, p.Name)
	}
	checkMonitor(t, find(t, hubObjs, "ServiceMonitor", "mcs-controller"), scrapeTarget{svc.GetNamespace(), svc.GetLabels(), svcPorts})

	memberObjs := render(t, "examples/member1-with-components")
	var pods []scrapeTarget
	for _, objs := range [][]*unstructured.Unstructured{memberObjs, renderMemberChart(t)} {
		d := typed[appsv1.Deployment](t, objs, "Deployment", "coredns")
		var podPorts []string
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			podPorts = append(podPorts, p.Name)
		}
		pods = append(pods, scrapeTarget{d.GetNamespace(), d.Spec.Template.Labels, podPorts})
	}
	checkMonitor(t, find(t, memberObjs, "PodMonitor", "coredns"), pods...)
}

// monitorSpec is what the tests read of a ServiceMonitor or PodMonitor.
type monitorSpec struct {
	Selector          metav1.LabelSelector `json:"selector"`
	NamespaceSelector map[string]any       `json:"namespaceSelector"`
	// Endpoints of a ServiceMonitor, PodMetricsEndpoints of a PodMonitor.
	Endpoints           []scrapeEndpoint `json:"endpoints"`
	PodMetricsEndpoints []scrapeEndpoint `json:"podMetricsEndpoints"`
}

// scrapeEndpoint is one port a monitor scrapes.
type scrapeEndpoint struct {
	Port string `json:"port"`
}

// scrapeTarget is a Service or pod a monitor must scrape: its namespace,
// labels and port names.
type scrapeTarget struct {
	namespace string
	labels    map[string]string
	ports     []string
}

// checkMonitor checks that monitor m selects each target in its own
// namespace (it names no other) and scrapes a port of it, and that every
// port it scrapes is one a target has.
func checkMonitor(t *testing.T, m *unstructured.Unstructured, targets ...scrapeTarget) {
	t.Helper()
	var spec monitorSpec
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m.Object["spec"].(map[string]any), &spec); err != nil {
		t.Fatalf("%s %s: %v", m.GetKind(), m.GetName(), err)
	}
	var scraped, all []string
	for _, e := range append(spec.Endpoints, spec.PodMetricsEndpoints...) {
		scraped = append(scraped, e.Port)
	}
	for _, target := range targets {
		all = append(all, target.ports...)
		if m.GetNamespace() != target.namespace || spec.NamespaceSelector != nil || !selects(t, &spec.Selector, target.labels) {
			t.Errorf("%s %s/%s selects %v (namespaces %v), not the targets in %s labelled %v",
				m.GetKind(), m.GetNamespace(), m.GetName(), spec.Selector, spec.NamespaceSelector, target.namespace, target.labels)
		}
		if !slices.ContainsFunc(scraped, func(p string) bool { return slices.Contains(target.ports, p) }) {
			t.Errorf("%s %s scrapes ports %v, none of its targets' %v", m.GetKind(), m.GetName(), scraped, target.ports)
		}
	}
	if slices.ContainsFunc(scraped, func(p string) bool { return !slices.Contains(all, p) }) {
		t.Errorf("%s %s scrapes ports %v; its targets have %v", m.GetKind(), m.GetName(), scraped, all)
	}
}

// The shards component runs as many replicas as shards, a replica takes
// no more shards than leaves every shard held with one replica lost, and
// its Role lets the controller campaign for the Lease of every shard its
// --shards asks for; the base overlay keeps the one Lease of a controller
// without shards.
func TestShardsComponentGrantsEveryLease(t *testing.T) {
	for dir, wantShards := range map[string]int{"overlays/hub": 1, "examples/hub-with-components": 4} {
		objs := render(t, dir)
		d := typed[appsv1.Deployment](t, objs, "Deployment", "mcs-controller")
		n, most := intArg(t, d, "--shards=", 1), intArg(t, d, "--max-shards=", 0)
		replicas := int(*d.Spec.Replicas)
		if n != wantShards || (n > 1 && replicas != n) {
			t.Errorf("%s: %d shards over %d replicas, want %d shards, a replica each", dir, n, replicas, wantShards)
		}
		if most > 0 && most*(replicas-1) < n {
			t.Errorf("%s: --max-shards=%d on %d replicas leaves a shard unheld when one replica is lost", dir, most, replicas)
		}
		role := typed[rbacv1.Role](t, objs, "Role", "mcs-controller")
		for i := range n {
			if lease := shards.LeaseName(i, n); !grants(role, lease, "get", "update") {
				t.Errorf("%s: the Role does not let the controller get and update the Lease %s", dir, lease)
			}
		}
	}
}

// intArg is the value of the controller's flag prefix (e.g. "--shards="),
// or def when it has none.
func intArg(t *testing.T, d *appsv1.Deployment, prefix string, def int) int {
	t.Helper()
	for _, arg := range d.Spec.Template.Spec.Containers[0].Args {
		if v, ok := strings.CutPrefix(arg, prefix); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", arg, err)
			}
			return n
		}
	}
	return def
}

// grants reports whether the Role grants verbs on the Lease name.
func grants(role *rbacv1.Role, name string, verbs ...string) bool {
	for _, verb := range verbs {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.APIGroups, "coordination.k8s.io") && slices.Contains(r.Resources, "leases") &&
				slices.Contains(r.Verbs, verb) && (len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name))
		}) {
			return false
		}
	}
	return true
}
