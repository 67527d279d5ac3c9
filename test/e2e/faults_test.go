//go:build lab

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// The tests of this file freeze or stop an API server of the shared lab for
// a while (labtest.Freeze, labtest.Stop): lab tests must not run in
// parallel with them.

const m3 = labtest.Member3

// Short source Leases, so that a lost provider turns stale in seconds.
var shortLeases = []string{"--source-lease-duration", "6s", "--source-lease-renew", "2s"}

// A provision cluster's API server hangs (member1's, frozen) while member2
// consumes foo from member1 and member3: nothing is deleted in member2;
// once source-member1 has expired, member2's coredns-mcs leaves member1's
// endpoints out while member3's serve, and answers with them when nothing
// else is left, and so does derived-foo's VIP: member1's imported
// endpoints are not ready meanwhile, and ready again when nothing else is;
// the MultiClusterService says member1 is unreachable. When member1
// answers again it serves again, and its next change arrives.
func TestProviderDown(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns, shortLeases...)
	_, endpoints := member2DNS(t)
	ips1, ips3 := fooFromTwo(t, ns, endpoints)
	name := native("foo", ns)
	before := importedSlices(t, ns, "foo")

	thaw := l.Freeze(t, m1, "kube-apiserver")
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, ips3...)))
	unreachable(t, ns, "foo", v1alpha1.EndpointSliceCollected, m1)
	staleForTheVIP(t, ns, "foo", m1, true)
	if got := importedSlices(t, ns, "foo"); !slices.Equal(got, before) {
		t.Errorf("member2's imported slices while member1 is away: %v, want %v as before", got, before)
	}

	l.Apply(t, m3, labtest.Deployment(ns, "foo", 0))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, ips1...)))
	staleForTheVIP(t, ns, "foo", m1, false)

	thaw()
	l.Workload(t, m1, ns, "foo", 2, false)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", 2)...)))
	if got := importedSlices(t, ns, "foo"); !slices.Equal(got, before) {
		t.Errorf("member2's imported slices after member1 is back: %v, want %v, one per source slice", got, before)
	}
}

// A consumption cluster's API server hangs (member2's, frozen) while foo
// changes in member1: the MultiClusterService says member2 is unreachable,
// member2's coredns-mcs answers from what it last saw meanwhile, and
// member2 converges once it answers again.
func TestConsumerDown(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns, shortLeases...)
	_, endpoints := member2DNS(t)
	l.Workload(t, m1, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
	name := native("foo", ns)
	old := readyIPs(t, m1, ns, "foo", 1)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, old...)))

	thaw := l.Freeze(t, m2, "kube-apiserver")
	l.Workload(t, m1, ns, "foo", 2, false)
	now := readyIPs(t, m1, ns, "foo", 2)
	unreachable(t, ns, "foo", v1alpha1.EndpointSliceApplied, m2)
	endpoints.expect(t, name, dns.TypeA, answer(endpoints.addrs(name, old...)))

	thaw()
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, now...)))
}

// A provision cluster's API server stops and starts again (member1's, as
// an upgrade or a crash would) while member2 consumes foo from member1 and
// member3. Unlike a freeze, connections are refused and every watch on
// member1 breaks. Nothing is deleted or rewritten in member2 but member1's
// imported endpoints, not ready once it is stale; the MultiClusterService's
// condition and a Warning Event name member1; once source-member1 has
// expired, member2 answers with member3's endpoints.
// When member1 is back, a change made there at once arrives with the one
// write it needs, and member2 still holds one imported slice per source
// slice. member1's side of foo is a slice the test writes, so the change
// waits for no controller of member1's own.
func TestProviderRestart(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	ctl := startController(t, ns, shortLeases...)
	_, endpoints := member2DNS(t)
	ips3 := fooFromSliceAndPod(t, ns, endpoints)
	name := native("foo", ns)
	before := importedSlices(t, ns, "foo")
	objects := member2Objects(t, ns, "foo")

	start := l.Stop(t, m1, "kube-apiserver")
	stopped := time.Now()
	unreachable(t, ns, "foo", v1alpha1.EndpointSliceCollected, m1)
	warned(t, ns, "foo", "ClusterUnreachable", m1)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, ips3...)))
	staleForTheVIP(t, ns, "foo", m1, true)
	unmarked := func(objs map[string]string) map[string]string {
		return maps.Collect(func(yield func(string, string) bool) {
			for k, v := range objs {
				if !strings.HasPrefix(k, "EndpointSlice/"+api.ImportedPrefix+m1+"-") && !yield(k, v) {
					return
				}
			}
		})
	}
	if got := member2Objects(t, ns, "foo"); !maps.Equal(unmarked(got), unmarked(objects)) {
		t.Errorf("member2's objects while member1 is away: %v, want them as they were but member1's slices: %v", got, objects)
	}
	writes := ctl.writes(t)
	start()
	back := time.Now()
	t.Logf("member1's API server was away for %s", back.Sub(stopped).Round(time.Millisecond))

	l.Apply(t, m1, oneEndpointSlice(ns, "foo", changedAddr))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, changedAddr, ips3[0])))
	t.Logf("member1's change was answered in member2 %s after member1 was back", time.Since(back).Round(time.Millisecond))
	if got := importedSlices(t, ns, "foo"); !slices.Equal(got, before) {
		t.Errorf("member2's imported slices after member1 is back: %v, want %v, one per source slice", got, before)
	}
	settled(t, ns, "foo")
	// The condition turns True again, after it said member1 was being
	// listed afresh when that took more than a probe's wait.
	// member1's slice is written once for the change, and once more if
	// the controller restored the endpoints the stale rule had marked not
	// ready before it saw the change.
	got := diff(ctl.writes(t), writes)
	status, slice := got["MultiClusterService/update-status"], got["EndpointSlice/update"]
	delete(got, "MultiClusterService/update-status")
	delete(got, "EndpointSlice/update")
	if len(got) > 0 || slice < 1 || slice > 2 || status < 1 || status > 2 {
		t.Errorf("writes since member1 came back: %v, %v slice and %v status updates; want 1 or 2 slice updates (the change, the restore) and 1 or 2 status updates, nothing else", got, slice, status)
	}
}

// The hub's API server stops, and starts again a little later, while
// member2 consumes foo from member1 and member3. The leader cannot renew
// its leadership and exits; what it wrote stays in member2, and member2's
// coredns-mcs answers as before, whatever the source Leases say. A
// replacement started meanwhile, as the Deployment would, waits for the
// hub, leads once it is back, and syncs the change member1 made meanwhile
// with the one write it needs: no condition flips.
func TestHubDown(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	args := slices.Concat(fastLeader, shortLeases)
	leader := startController(t, ns, args...)
	_, endpoints := member2DNS(t)
	ips3 := fooFromSliceAndPod(t, ns, endpoints)
	name := native("foo", ns)
	was := endpoints.addrs(name, slice1Addr, ips3[0])
	conditions := settled(t, ns, "foo")
	objects := member2Objects(t, ns, "foo")

	start := l.Stop(t, labtest.Hub, "kube-apiserver")
	stopped := time.Now()
	select {
	case <-leader.Exited():
	case <-time.After(converge):
		t.Fatal("the leader still runs with the hub away")
	}
	if err := leader.Alive(); !strings.Contains(err.Error(), "exit status 0") || !strings.Contains(leader.Output(), "Lost the lead") {
		t.Errorf("the leader %v, want it to exit 0 saying it lost the lead", err)
	}
	replacement := runController(t, ns, args...)
	l.Apply(t, m1, oneEndpointSlice(ns, "foo", changedAddr))
	// Longer than a source Lease lasts: stale or not, member2 answers.
	time.Sleep(time.Until(stopped.Add(8 * time.Second)))
	endpoints.expect(t, name, dns.TypeA, answer(was))
	if got := member2Objects(t, ns, "foo"); !maps.Equal(got, objects) {
		t.Errorf("member2's objects while the hub is away: %v, want them as they were: %v", got, objects)
	}
	start()
	t.Logf("the hub's API server was away for %s", time.Since(stopped).Round(time.Millisecond))

	leading(t, []*controller{replacement})
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, changedAddr, ips3[0])))
	if got := settled(t, ns, "foo"); !equality.Semantic.DeepEqual(got, conditions) {
		t.Errorf("conditions after the hub is back: %+v, want them unchanged: %+v", got, conditions)
	}
	if w := replacement.writes(t); !maps.Equal(w, map[string]float64{"EndpointSlice/update": 1}) {
		t.Errorf("the replacement wrote %v, want the one EndpointSlice update of member1's change", w)
	}
}

// fooFromTwo runs foo with a pod in member1 and one in member3, which a
// MultiClusterService provides to member2, and waits until member2's
// coredns-mcs answers foo's native name with both; it returns their
// addresses.
func fooFromTwo(t *testing.T, ns string, endpoints *server) (ips1, ips3 []string) {
	t.Helper()
	labtest.Get(t).Workload(t, m1, ns, "foo", 1, false)
	ips1 = readyIPs(t, m1, ns, "foo", 1)
	return ips1, provideFoo(t, ns, endpoints, ips1...)
}

// Addresses of member1's slice of foo in fooFromSliceAndPod, before and
// after a change, in member1's pod CIDR.
const slice1Addr, changedAddr = "10.10.250.1", "10.10.250.2"

// fooFromSliceAndPod is fooFromTwo with member1's foo a Service without a
// selector, whose slice the test writes (one endpoint, slice1Addr): it
// returns member3's address.
func fooFromSliceAndPod(t *testing.T, ns string, endpoints *server) []string {
	t.Helper()
	svc := labtest.Service(ns, "foo", false)
	svc.Spec.Selector = nil
	labtest.Get(t).Apply(t, m1, svc, oneEndpointSlice(ns, "foo", slice1Addr))
	return provideFoo(t, ns, endpoints, slice1Addr)
}

// provideFoo runs a pod of foo in member3, provides foo from member1 and
// member3 to member2, and waits until member2's coredns-mcs answers with
// member1's addrs1 and member3's pod, whose address it returns.
func provideFoo(t *testing.T, ns string, endpoints *server, addrs1 ...string) []string {
	t.Helper()
	l := labtest.Get(t)
	l.Workload(t, m3, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1, m3}, []v1alpha1.ClusterName{m2}))
	ips3 := readyIPs(t, m3, ns, "foo", 1)
	name := native("foo", ns)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, slices.Concat(addrs1, ips3)...)))
	return ips3
}

// multiClusterService reads the hub's MultiClusterService.
func multiClusterService(ctx context.Context, t *testing.T, ns, name string) (*v1alpha1.MultiClusterService, error) {
	u, err := labtest.Get(t).Dynamic(t, labtest.Hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	m := &v1alpha1.MultiClusterService{}
	return m, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m)
}

// settled waits until every condition of the MultiClusterService is True,
// and returns them.
func settled(t *testing.T, ns, name string) []metav1.Condition {
	t.Helper()
	var conditions []metav1.Condition
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		m, err := multiClusterService(ctx, t, ns, name)
		if err != nil {
			return err
		}
		conditions = m.Status.Conditions
		for _, c := range []string{v1alpha1.ServiceApplied, v1alpha1.EndpointSliceCollected, v1alpha1.EndpointSliceApplied} {
			if !meta.IsStatusConditionTrue(conditions, c) {
				return fmt.Errorf("%s is %+v, want True", c, meta.FindStatusCondition(conditions, c))
			}
		}
		return nil
	})
	return conditions
}

// warned waits for a Warning Event on the MultiClusterService with that
// reason, naming cluster.
func warned(t *testing.T, ns, name, reason, cluster string) {
	t.Helper()
	events := labtest.Get(t).Client(t, labtest.Hub).CoreV1().Events(ns)
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		list, err := events.List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return err
		}
		var seen []string
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Message, cluster) {
				return nil
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Message)
		}
		return fmt.Errorf("no Warning %s naming %s among %q", reason, cluster, seen)
	})
}

// member2Objects maps what the controller wrote into member2 for service
// name (the imported slices, the ServiceImport and the derived Service) to
// their resource versions: any write changes them.
func member2Objects(t *testing.T, ns, name string) map[string]string {
	t.Helper()
	l := labtest.Get(t)
	kube := l.Client(t, m2)
	out := map[string]string{}
	list, err := kube.DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		out["EndpointSlice/"+s.Name] = s.ResourceVersion
	}
	derived, err := kube.CoreV1().Services(ns).Get(t.Context(), api.DerivedPrefix+name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["Service/"+derived.Name] = derived.ResourceVersion
	imp, err := l.Dynamic(t, m2).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out["ServiceImport/"+name] = imp.GetResourceVersion()
	return out
}

// diff is after minus before, by key, leaving out what did not change.
func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// unreachable waits until the MultiClusterService's condition says that
// cluster cannot be reached.
func unreachable(t *testing.T, ns, name, condition, cluster string) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		m, err := multiClusterService(ctx, t, ns, name)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, condition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ClusterUnreachable" || !strings.Contains(c.Message, cluster) {
			return fmt.Errorf("%s is %+v, want ClusterUnreachable naming %s", condition, c, cluster)
		}
		return nil
	})
}

// staleForTheVIP waits until member2's imported endpoints of service name
// from source say what a stale source's say while another has ready ones
// (not ready, annotated) or, when stale is false, are ready again.
func staleForTheVIP(t *testing.T, ns, name, source string, stale bool) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		list, err := labtest.Get(t).Client(t, m2).DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: mcsv1beta1.LabelServiceName + "=" + name + "," + mcsv1beta1.LabelSourceCluster + "=" + source,
		})
		if err != nil || len(list.Items) == 0 {
			return fmt.Errorf("member2's slices from %s: %v (%v)", source, list, err)
		}
		for _, s := range list.Items {
			_, marked := s.Annotations[api.AnnotationStale]
			for _, e := range s.Endpoints {
				if ready := e.Conditions.Ready == nil || *e.Conditions.Ready; ready == stale || marked != stale {
					return fmt.Errorf("member2's slice %s: ready %v, annotated %v; want the opposite of ready: %v", s.Name, ready, marked, stale)
				}
			}
		}
		return nil
	})
}

// importedSlices names member2's imported slices of service name.
func importedSlices(t *testing.T, ns, name string) []string {
	t.Helper()
	list, err := labtest.Get(t).Client(t, m2).DiscoveryV1().EndpointSlices(ns).List(t.Context(), metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}
