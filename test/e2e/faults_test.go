//go:build lab

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// The tests of this file freeze an API server of the shared lab for a
// while (labtest.Freeze): lab tests must not run in parallel with them.

const m3 = labtest.Member3

// Short source Leases, so that a lost provider turns stale in seconds.
var shortLeases = []string{"--source-lease-duration", "6s", "--source-lease-renew", "2s"}

// A provision cluster's API server hangs (member1's, frozen) while member2
// consumes foo from member1 and member3: nothing is deleted in member2;
// once source-member1 has expired, member2's coredns-mcs leaves member1's
// endpoints out while member3's serve, and answers with them when nothing
// else is left; the MultiClusterService says member1 is unreachable. When
// member1 answers again it serves again, and its next change arrives.
func TestProviderDown(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	startController(t, ns, shortLeases...)
	_, endpoints := member2DNS(t)
	l.Workload(t, m1, ns, "foo", 1, false)
	l.Workload(t, m3, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1, m3}, []v1alpha1.ClusterName{m2}))
	ips1, ips3 := readyIPs(t, m1, ns, "foo", 1), readyIPs(t, m3, ns, "foo", 1)
	name := native("foo", ns)
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, slices.Concat(ips1, ips3)...)))
	before := importedSlices(t, ns, "foo")

	thaw := l.Freeze(t, m1, "kube-apiserver")
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, ips3...)))
	unreachable(t, ns, "foo", v1alpha1.EndpointSliceCollected, m1)
	if got := importedSlices(t, ns, "foo"); !slices.Equal(got, before) {
		t.Errorf("member2's imported slices while member1 is away: %v, want %v as before", got, before)
	}

	l.Apply(t, m3, labtest.Deployment(ns, "foo", 0))
	endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, ips1...)))

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

// unreachable waits until the MultiClusterService's condition says that
// cluster cannot be reached.
func unreachable(t *testing.T, ns, name, condition, cluster string) {
	t.Helper()
	l := labtest.Get(t)
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		u, err := l.Dynamic(t, labtest.Hub).Resource(v1alpha1.Resource).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m := &v1alpha1.MultiClusterService{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, m); err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, condition)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ClusterUnreachable" || !strings.Contains(c.Message, cluster) {
			return fmt.Errorf("%s is %+v, want ClusterUnreachable naming %s", condition, c, cluster)
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
