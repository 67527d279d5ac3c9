package controller

import (
	"context"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// forged is an EndpointSlice with the controller's managed-by label and
// kubernetes.io/service-name derived-<svc>, but none of the MCS API's
// labels: no import of the controller's made it, and kube-proxy sends
// derived-<svc>'s traffic to its endpoints.
func forged(svc, name string) *discoveryv1.EndpointSlice {
	s := slice(api.DerivedPrefix+svc, name, 1, "10.250.0.1")
	s.Labels[discoveryv1.LabelManagedBy] = api.ManagedBy
	return s
}

// A slice that carries the controller's managed-by label and belongs to
// no import it made is deleted, in a consumer (beside the imported ones)
// and in a member that consumes nothing; its appearing queues the service
// it would divert.
func TestOrphanSlicesDeleted(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1(), forged("foo", "evil")},
		m3:  {ns1()},
	})
	expect(t, "sync", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  append(firstImport("foo", "imported-member1-foo-1"), "delete endpointslices demo/evil"),
	})

	queued(f.c, "") // drains the queue
	f.change(m3, forged("foo", "evil"), "create")
	// The informer runs its handlers after its cache holds the slice.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, "demo/foo"), nil
	})
	if err != nil {
		t.Fatalf("a forged slice of derived-foo did not queue demo/foo: %v", err)
	}
	expect(t, "in a member that consumes nothing", f.sync("demo/foo"), writes{
		m3: {"delete endpointslices demo/evil"},
	})
	expect(t, "again: nothing more", f.sync("demo/foo"), writes{})
}
