package controller

import (
	"testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// Without --create-namespaces, a consumer that lacks the service's
// namespace gets nothing written, and the sync says how to have it; once
// the namespace is there, the service is imported.
func TestNamespacesCreatedOnlyWhenAsked(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
	}, withoutNamespaces())
	expect(t, "no namespace", f.syncFailing("demo/foo", "member2 has no namespace demo, and mcs-controller creates none without --create-namespaces"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
	})
	f.change(m2, ns1(), "create")
	expect(t, "the namespace made", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  firstImport("foo", "imported-member1-foo-1"),
	})
}
