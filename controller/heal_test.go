package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"

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

// awaitQueued waits until key is in the queue: the informers call their
// handlers after their caches have changed, on goroutines of their own.
func awaitQueued(t *testing.T, c *Controller, key string) bool {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return queued(c, key), nil
	})
	return err == nil
}
