package controller

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// What the controller wrote and someone else deleted comes back at the
// next sync, which the deletion queues: also when the informer delivered
// the controller's own write before the deletion, so that nothing but the
// cache remembers it. A second sync writes nothing.
func TestDeletedByOthersComeBack(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  func(*fixture) runtime.Object
		want []string
	}{
		{"imported slice", func(f *fixture) runtime.Object { return f.sliceOf(m2, "imported-member1-foo-1") },
			[]string{"create endpointslices demo/imported-member1-foo-1"}},
		// The fakes collect no garbage: what the import owned stays, and
		// gets the new import as its owner.
		{"ServiceImport", func(f *fixture) runtime.Object { return f.importOf(m2, "foo") }, []string{
			"create serviceimports demo/foo", "update services demo/derived-foo", "update serviceimports demo/foo",
			"update serviceimports/status demo/foo", "update endpointslices demo/imported-member1-foo-1",
		}},
		{"derived Service", func(f *fixture) runtime.Object { return f.serviceOf(m2, "derived-foo") }, []string{
			"create services demo/derived-foo", "update serviceimports demo/foo", "update serviceimports/status demo/foo",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, world{
				hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
				m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
				m2:  {ns1()},
			})
			expect(t, "sync", f.sync("demo/foo"), writes{
				hub: {"update multiclusterservices/status demo/foo"},
				m2:  firstImport("foo", "imported-member1-foo-1"),
			})
			queued(f.c, "") // empty the queue
			f.change(m2, tc.obj(f), "delete")
			if !awaitQueued(t, f.c, "demo/foo") {
				t.Errorf("deleted: demo/foo not queued")
			}
			got := f.sync("demo/foo")
			delete(got, hub) // a new VIP is in the status message
			expect(t, "deleted", got, writes{m2: tc.want})
			expect(t, "back, again", f.sync("demo/foo"), writes{})
		})
	}
}

// A write the informer never delivered (made, then deleted by someone
// else between two lists of a relisting informer) was taken for present
// while the tracker remembered it; once it is forgotten, its service is
// queued, so that the sync makes it anew. A write the cache holds queues
// nothing, also when its echo came before the write was recorded.
func TestUnseenWriteHeals(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	}, withOptions(Options{Clock: fc}))
	f.sync("demo/foo")
	queued(f.c, "") // empty the queue
	sweep := func() {
		fc.Step(trackTTL + time.Second)
		f.c.track.sweep()
	}
	sweep()
	if queued(f.c, "demo/foo") {
		t.Error("what the informers delivered queued its service when swept")
	}

	held := f.sliceOf(m2, "imported-member1-foo-1")
	f.c.track.wrote(trackKey{m2, "EndpointSlice", ns, held.Name}, held, "demo/foo") // echo first
	sweep()
	if queued(f.c, "demo/foo") {
		t.Error("a write the cache holds queued its service when swept")
	}

	lost := held.DeepCopy()
	lost.Name, lost.ResourceVersion = "imported-member1-foo-2", "999999"
	f.c.track.wrote(trackKey{m2, "EndpointSlice", ns, lost.Name}, lost, "demo/foo")
	sweep()
	if !queued(f.c, "demo/foo") {
		t.Error("a write the informer never delivered did not queue its service when swept")
	}
}

// awaitQueued waits until key is in the queue: the informers call their
// handlers after their caches have changed, on goroutines of their own.
func awaitQueued(t *testing.T, c *Controller, key string) bool {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return queued(c, key), nil
	})
	return err == nil
}

// A MultiClusterService named derived-bar whose hub Service is propagated
// holds that name in the members until bar is imported there: bar's
// derived Service takes the name (and the Service over, its selector
// gone), and derived-bar says so on its
// ServiceApplied. A sync of either deletes nothing of the other's, and a
// second sync of each writes nothing.
func TestNamesThatCollide(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("derived-bar", api.RemoteAndLocal, []v1alpha1.ClusterName{m3}, []v1alpha1.ClusterName{m2}, true), service("derived-bar", false, t0)},
		m1:  {ns1(), service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2")},
		m2:  {ns1()},
		m3:  {ns1(), service("derived-bar", false, t0), slice("derived-bar", "db-1", 1, "10.3.0.1")},
	})
	expect(t, "derived-bar", f.sync("demo/derived-bar"), writes{
		hub: {"update multiclusterservices/status demo/derived-bar"},
		m2:  append([]string{"create services demo/derived-bar"}, firstImport("derived-bar", "imported-member3-db-1")...),
	})
	expect(t, "bar, not imported anywhere", f.sync("demo/bar"), writes{})
	expect(t, "derived-bar again", f.sync("demo/derived-bar"), writes{})

	f.change(hub, multiClusterService("bar", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true), "create")
	expect(t, "bar imported", f.sync("demo/bar"), writes{
		hub: {"update multiclusterservices/status demo/bar"},
		m2: {"create serviceimports demo/bar", "update services demo/derived-bar", "update serviceimports demo/bar",
			"update serviceimports/status demo/bar", "create endpointslices demo/imported-member1-bar-1"},
	})
	expect(t, "derived-bar yields", f.sync("demo/derived-bar"), writes{hub: {"update multiclusterservices/status demo/derived-bar"}})
	c := meta.FindStatusCondition(f.mcsOf("derived-bar").Status.Conditions, v1alpha1.ServiceApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonNameTaken || !strings.Contains(c.Message, "member2: Service demo/derived-bar is the derived Service of bar") {
		t.Errorf("derived-bar's ServiceApplied %+v, want False, NameTaken, naming member2 and bar", c)
	}
	if got := f.serviceOf(m2, "derived-bar"); got.Spec.Selector != nil || got.Labels[mcsv1b1.LabelServiceName] != "bar" {
		t.Errorf("member2's derived-bar %+v, want bar's derived Service", got)
	}
	expect(t, "bar again", f.sync("demo/bar"), writes{})
	expect(t, "derived-bar once more", f.sync("demo/derived-bar"), writes{})
	if err := f.c.sync(t.Context(), "demo/derived-bar"); err != nil {
		t.Errorf("a name taken is retried: %v", err)
	}
}

// A provider's endpoints past --max-imported-endpoints are left out of
// every consumer, and EndpointSliceCollected says how many.
func TestImportedEndpointsBounded(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1", "10.1.0.2", "10.1.0.3")},
		m2:  {ns1()},
	}, withOptions(Options{MaxImportedEndpoints: 2}))
	f.sync("demo/foo")
	if got := len(f.sliceOf(m2, "imported-member1-foo-1").Endpoints); got != 2 {
		t.Errorf("member2 imports %d endpoints, want 2", got)
	}
	c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceCollected)
	if c == nil || !strings.Contains(c.Message, "member1: 1 endpoints left out") {
		t.Errorf("EndpointSliceCollected %+v, want it to say member1's endpoint was left out", c)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// What a member's API server answers stays on the hub: the exporting
// member's ServiceExport says how many consumers failed, not why (their
// addresses, their Secrets' names are other members' facts), and no
// message keeps a character that is not printable.
func TestMembersToldTheirOwnFacts(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2:  {ns1()},
	})
	f.kube[m2].PrependReactor("create", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("refused by the webhook at 10.9.9.9:443 \x1b[31mred\x1b[0m")
	})
	f.syncFailing("demo/foo", "10.9.9.9")
	applied := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceApplied)
	if applied == nil || !strings.Contains(applied.Message, "10.9.9.9") || strings.ContainsRune(applied.Message, '\x1b') {
		t.Errorf("the hub's EndpointSliceApplied: %+v, want the cause, printable", applied)
	}
	exp := f.exportOf(m1, "foo")
	ready := meta.FindStatusCondition(exp.Status.Conditions, string(mcsv1b1.ServiceExportConditionReady))
	if ready == nil || ready.Status != metav1.ConditionFalse || strings.Contains(ready.Message, "10.9.9.9") || strings.Contains(ready.Message, m2) {
		t.Errorf("member1's Ready: %+v, want False naming neither member2 nor its error", ready)
	}
}
