//go:build lab

package e2e

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// The tests of this file run the whole product: bin/mcs-controller syncs
// the lab's members, and member2's bin/coredns-mcs answers from what it
// wrote. Cluster names are the lab's own, since the controller under test
// renews the Leases source-<cluster> of those names.

const (
	m1 = labtest.Member1
	m2 = labtest.Member2
)

// converge bounds the wait for the controller and DNS to follow a change:
// seconds in practice, more under -race on a busy machine.
const converge = 60 * time.Second

// controller is a running bin/mcs-controller.
type controller struct {
	*process.Process
	addr, metricsURL string
}

// startController runs bin/mcs-controller against the lab's hub and members,
// limited to namespace ns, and waits until it is ready. Its own namespace on
// the hub, of its leader-election Lease, is ns-mcs, the same for every
// controller of a test: a Service of the controller's namespace is never
// exported.
func startController(t *testing.T, ns string, args ...string) *controller {
	t.Helper()
	return startReplicas(t, ns, 1, args...)[0]
}

// startReplicas is startController for n replicas started at once, as a
// Deployment's are, and waits until every one is ready.
func startReplicas(t *testing.T, ns string, n int, args ...string) []*controller {
	t.Helper()
	labtest.Get(t).InstallCRDs(t) // a fresh lab's hub has no MultiClusterService CRD yet
	labtest.Get(t).NamedNamespace(t, ownNamespace(ns), labtest.Hub)
	var out []*controller
	for range n {
		out = append(out, launchController(t, ns, args...))
	}
	for _, c := range out {
		c.waitReady(t)
	}
	return out
}

func ownNamespace(ns string) string { return ns + "-mcs" }

// runController is startController without touching the hub: it also
// starts a controller while the hub is away.
func runController(t *testing.T, ns string, args ...string) *controller {
	t.Helper()
	c := launchController(t, ns, args...)
	c.waitReady(t)
	return c
}

// launchController starts bin/mcs-controller as runController does, and
// does not wait.
func launchController(t *testing.T, ns string, args ...string) *controller {
	t.Helper()
	return launchControllerBinary(t, controllerBinary(t), ns, args...)
}

// controllerBinary is bin/mcs-controller, which must be built from the
// current sources.
func controllerBinary(t *testing.T) string {
	t.Helper()
	return built(t, "mcs-controller", "controller", "controller/desired", "controller/members", "controller/leases", "controller/shards", "api", "cmd/mcs-controller")
}

// launchControllerBinary is launchController with the mcs-controller
// binary bin, of this or another version (skew_test.go).
func launchControllerBinary(t *testing.T, bin, ns string, args ...string) *controller {
	t.Helper()
	l := labtest.Get(t)
	p, addr := labtest.StartController(t, bin, append([]string{
		"--kubeconfig", l.KubeconfigOf(t, labtest.Hub), "--clusters-kubeconfig", l.MembersKubeconfig(t),
		"--namespace", ownNamespace(ns), "--watch-namespaces", ns, "--probe-interval", "1s", "--create-namespaces",
	}, args...)...)
	return &controller{Process: p, addr: addr, metricsURL: "http://" + addr + "/metrics"}
}

// waitReady waits until the controller's /readyz says ready.
func (c *controller) waitReady(t *testing.T) {
	t.Helper()
	if err := c.WaitFor(t.Context(), converge, process.HTTPOK("http://"+c.addr+"/readyz")); err != nil {
		t.Fatal(err)
	}
}

// member2DNS runs coredns-mcs for member2: a block answering VIPs (ttl 5)
// and one answering endpoints (ttl 600), each above the kubernetes plugin.
func member2DNS(t *testing.T) (vip, endpoints *server) {
	t.Helper()
	p := startCoreDNS(t, config{context: m2, cluster: m2, blocks: []block{vipBlock, endpointsBlock}})
	p.waitReady(t, startTimeout)
	return p.servers[0], p.servers[1]
}

func native(svc, ns string) string     { return fmt.Sprintf("%s.%s.svc.cluster.local.", svc, ns) }
func clusterset(svc, ns string) string { return fmt.Sprintf("%s.%s.svc.clusterset.local.", svc, ns) }

// readyIPs waits until cluster runs want ready pods of app name, and
// returns their addresses.
func readyIPs(t *testing.T, cluster, ns, name string, want int) []string {
	t.Helper()
	l := labtest.Get(t)
	var ips []string
	labtest.Eventually(t, converge, func(ctx context.Context) (err error) {
		ips, err = l.ReadyPodIPs(ctx, t, cluster, ns, name, want)
		return err
	})
	return ips
}

// clusterIP waits until cluster has Service name with a ClusterIP.
func clusterIP(t *testing.T, cluster, ns, name string) string {
	t.Helper()
	return labtest.Get(t).ClusterIP(t, cluster, ns, name, converge)
}

// Story 1, through DNS: foo runs only in member1, and
// a MultiClusterService provides it to member2, LocalFirst. member2's
// coredns-mcs answers foo's native name with the derived VIP and, with
// answer endpoints, with member1's pods; a scale-up in member1 follows.
func TestStoryOneThroughDNS(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	ctl := startController(t, ns)
	vip, endpoints := member2DNS(t)
	l.Workload(t, m1, ns, "foo", 2, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.LocalFirst, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))

	name := native("foo", ns)
	derived := clusterIP(t, m2, ns, api.DerivedPrefix+"foo")
	vip.expectWithin(t, converge, name, dns.TypeA, answer(vip.addrs(name, derived)))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", 2)...)))
	vip.expect(t, clusterset("foo", ns), dns.TypeA, answer(vip.addrs(clusterset("foo", ns), derived)))

	before := ctl.scrape(t)
	l.Workload(t, m1, ns, "foo", 3, false)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", 3)...)))
	ctl.expectMetrics(t, before)
}

// scrape reads the controller's /metrics.
func (c *controller) scrape(t *testing.T) metrics {
	t.Helper()
	m, err := getMetrics(t.Context(), c.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// expectMetrics checks what an operator reads off /metrics after story 1's
// scale-up: both members reachable, member2's imported slice written, and
// the change's propagation measured.
func (c *controller) expectMetrics(t *testing.T, before metrics) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		after, err := getMetrics(ctx, c.metricsURL)
		if err != nil {
			return err
		}
		for _, s := range []string{series("mcs_member_reachable", "cluster", m1), series("mcs_member_reachable", "cluster", m2)} {
			if after[s] != 1 {
				return fmt.Errorf("%s = %v, want 1", s, after[s])
			}
		}
		grew := []string{
			series("mcs_writes_total", "cluster", m2, "kind", "EndpointSlice", "verb", "update", "result", "success"),
			series("mcs_propagation_seconds_count"),
			series("mcs_sync_svc_duration_seconds_count", "result", "success"),
			series("mcs_sync_eps_duration_seconds_count", "cluster", m2),
			series("workqueue_adds_total", "name", "service"),
		}
		for _, s := range grew {
			if after[s] <= before[s] {
				return fmt.Errorf("%s went from %v to %v, want more", s, before[s], after[s])
			}
		}
		return nil
	})
}

// LocalFirst through DNS: foo runs in member1 and member2. member2 answers
// with its own endpoints (and its own VIP) while one is ready, with
// member1's (and the derived VIP) once member2's foo is scaled to 0, and
// with its own again when it is back.
func TestLocalFirstThroughDNS(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns)
	vip, endpoints := member2DNS(t)
	l.Workload(t, m1, ns, "foo", 2, false)
	l.Workload(t, m2, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.LocalFirst, nil, nil))

	name := native("foo", ns)
	local, derived := clusterIP(t, m2, ns, "foo"), clusterIP(t, m2, ns, api.DerivedPrefix+"foo")
	remote := readyIPs(t, m1, ns, "foo", 2)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m2, ns, "foo", 1)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, local)))

	l.Apply(t, m2, labtest.Deployment(ns, "foo", 0))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, remote...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, derived)))

	l.Apply(t, m2, labtest.Deployment(ns, "foo", 1))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m2, ns, "foo", 1)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, local)))
}

// LocalFirst's policy through DNS: foo runs in all three members, member2
// consumes it with a minimum of 2 ready local endpoints and the failover
// order member3, member1. With 3 local pods member2 answers its own; scaled
// to 1 it answers member3's pod (and the VIP turns to member3's provider
// Service's), with member3 scaled to 0 member1's (and its provider VIP),
// and back at 2 its own again. The API
// server refuses a failover cluster that is not a provision cluster.
func TestLocalFirstPolicyThroughDNS(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns)
	vip, endpoints := member2DNS(t)
	const m3 = labtest.Member3
	l.Workload(t, m1, ns, "foo", 1, false)
	l.Workload(t, m2, ns, "foo", 3, false)
	l.Workload(t, m3, ns, "foo", 1, false)
	mcs := labtest.MultiClusterService(ns, "foo", api.LocalFirst, []v1alpha1.ClusterName{m1, m2, m3}, []v1alpha1.ClusterName{m2})
	mcs.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{MinReadyEndpoints: ptr.To[int32](2), FailoverOrder: []v1alpha1.ClusterName{m3, m1}}
	l.Apply(t, labtest.Hub, mcs)

	name := native("foo", ns)
	local := clusterIP(t, m2, ns, "foo")
	first, second := clusterIP(t, m2, ns, api.ProviderService("foo", m3)), clusterIP(t, m2, ns, api.ProviderService("foo", m1))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m2, ns, "foo", 3)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, local)))

	l.Apply(t, m2, labtest.Deployment(ns, "foo", 1))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m3, ns, "foo", 1)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, first)))

	l.Apply(t, m3, labtest.Deployment(ns, "foo", 0))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", 1)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, second)))

	l.Apply(t, m2, labtest.Deployment(ns, "foo", 2))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m2, ns, "foo", 2)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, local)))

	bad := mcs.DeepCopy()
	bad.Name, bad.Spec.ServiceProvisionClusters = "bar", []v1alpha1.ClusterName{m1}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(bad)
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: u}
	obj.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	obj.SetKind("MultiClusterService")
	_, err = l.Dynamic(t, labtest.Hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(ns).Create(t.Context(), obj, metav1.CreateOptions{})
	if want := "spec.localFirst.failoverOrder may name provision clusters only"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("creating a MultiClusterService failing over to a cluster that does not provide: %v, want %q", err, want)
	}
}

// The MCS API's flow, through DNS: a ServiceExport of serve in member1
// makes serve.<ns>.svc.clusterset.local answer the derived VIP in member2,
// while serve.<ns>.svc.cluster.local stays member2's own Service (no
// MultiClusterService asked for native names). Deleting the ServiceExport
// takes the clusterset name away.
func TestExportThroughDNS(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns)
	vip, _ := member2DNS(t)
	l.Workload(t, m1, ns, "serve", 2, false)
	l.Workload(t, m2, ns, "serve", 1, false)
	l.Apply(t, m1, labtest.ServiceExport(ns, "serve"))

	set := clusterset("serve", ns)
	vip.expectWithin(t, converge, set, dns.TypeA, answer(vip.addrs(set, clusterIP(t, m2, ns, api.DerivedPrefix+"serve"))))
	name := native("serve", ns)
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, clusterIP(t, m2, ns, "serve"))))

	exports := mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports")
	err := l.Dynamic(t, m1).Resource(exports).Namespace(ns).Delete(t.Context(), "serve", metav1.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vip.expectWithin(t, converge, set, dns.TypeA, vip.nxdomain("clusterset.local."))
}

// Headless services through DNS: the per-pod names of member1's StatefulSet
// pods resolve from member2 in both zones, and the service's name answers
// every pod.
func TestHeadlessThroughDNS(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns)
	vip, _ := member2DNS(t)
	l.Apply(t, m1, labtest.StatefulSet(ns, "web", 2), labtest.Service(ns, "web", true))
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "web", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))

	ips := readyIPs(t, m1, ns, "web", 2)
	set := clusterset("web", ns)
	vip.expectWithin(t, converge, set, dns.TypeA, answer(vip.addrs(set, ips...)))
	for i := range 2 {
		pod := fmt.Sprintf("web-%d", i)
		got, err := l.Client(t, m1).CoreV1().Pods(ns).Get(t.Context(), pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{pod + "." + native("web", ns), pod + "." + m1 + "." + set} {
			vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, got.Status.PodIP)))
		}
	}
}

// leaderLease is the leadership Lease of fastLeader, whose short times let
// a test see a leader lost and replaced in seconds.
const leaderLease = 3 * time.Second

var fastLeader = []string{"--leader-elect-lease-duration", leaderLease.String(), "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms"}

// Two replicas with leader election: one leads and the standby writes
// nothing; killing the leader (SIGKILL, so it cannot hand the lead over)
// makes the standby lead within a few lease durations, without a write on
// the unchanged world, and it then syncs the next change.
func TestTwoReplicas(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	replicas := []*controller{startController(t, ns, fastLeader...), startController(t, ns, fastLeader...)}
	l.Workload(t, m1, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
	vip, endpoints := member2DNS(t)
	name := native("foo", ns)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", 1)...)))

	leader := leading(t, replicas)
	standby := replicas[1-leader]
	if w := standby.writes(t); len(w) > 0 {
		t.Errorf("the standby wrote %v", w)
	}
	replicas[leader].Kill()
	killed := time.Now()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		m, err := getMetrics(ctx, standby.metricsURL)
		if err != nil {
			return err
		}
		if s := series("leader_election_master_status", "name", "mcs-controller"); m[s] != 1 {
			return fmt.Errorf("the standby does not lead yet: %s = %v", s, m[s])
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("the standby leads %s after the leader was killed (lease %s)", took.Round(time.Millisecond), leaderLease)
	if took > 5*leaderLease {
		t.Errorf("the standby took %s to lead, want about the lease duration %s", took, leaderLease)
	}

	l.Workload(t, m1, ns, "foo", 2, false)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", 2)...)))
	vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, clusterIP(t, m2, ns, api.DerivedPrefix+"foo"))))
	if w := standby.writes(t); !maps.Equal(w, map[string]float64{"EndpointSlice/update": 1}) {
		t.Errorf("the new leader wrote %v after taking over, want the one EndpointSlice update of the change", w)
	}
}

// leading returns the index of the replica that leads, once one does.
func leading(t *testing.T, replicas []*controller) int {
	t.Helper()
	leader := -1
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		for i, r := range replicas {
			m, err := getMetrics(ctx, r.metricsURL)
			if err != nil {
				return err
			}
			if m[series("leader_election_master_status", "name", "mcs-controller")] == 1 {
				leader = i
				return nil
			}
		}
		return fmt.Errorf("no replica leads")
	})
	return leader
}

// writes sums the controller's mcs_writes_total by kind/verb, without the
// Leases it renews on a clock.
func (c *controller) writes(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := process.Scrape(t.Context(), c.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, m := range families["mcs_writes_total"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["kind"] != "Lease" {
			out[labels["kind"]+"/"+labels["verb"]] += m.GetCounter().GetValue()
		}
	}
	return out
}
