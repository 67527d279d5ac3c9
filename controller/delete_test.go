package controller

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

var cleaned = []string{"delete endpointslices demo/imported-member1-foo-1", "delete services demo/derived-foo", "delete serviceimports demo/foo"}

// Deleting a MultiClusterService while a consumer is unreachable cleans
// every other consumer at once, keeps the finalizer and says why, and
// finishes once that consumer is back and cleaned.
func TestDeleteWhileConsumerUnreachable(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2, m3}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
		m3:  {ns1()},
	})
	f.sync("demo/foo")
	f.setDown(m3, true)
	gone := f.mcsOf("foo")
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	f.change(hub, gone, "update")
	expect(t, "deleted", f.sync("demo/foo"), writes{hub: {"update multiclusterservices/status demo/foo"}, m2: cleaned})
	m := f.mcsOf("foo")
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceApplied)
	if len(m.Finalizers) != 1 || c == nil || c.Reason != "CleanupPending" || !strings.Contains(c.Message, "member3 is unreachable") {
		t.Errorf("finalizers %v, EndpointSliceApplied %+v; want the finalizer kept and CleanupPending naming member3", m.Finalizers, c)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})

	f.setDown(m3, false)
	awaitSynced(t, f, m3)
	expect(t, "member3 back", f.sync("demo/foo"), writes{hub: {"patch multiclusterservices demo/foo"}, m3: cleaned})
	if fin := f.mcsOf("foo").Finalizers; len(fin) != 0 {
		t.Errorf("finalizers %v, want none", fin)
	}
}

// The last ServiceExport deleted while a member that never provided the
// service has not synced: its imports go at once. A provider that has not
// synced (a restart while it is away) keeps them.
func TestExportDeletedWhileMemberUnknown(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
	}, withDown(m3))
	f.sync("demo/foo")

	f.mu.Lock()
	f.down[m1] = true
	f.mu.Unlock()
	f.restart()
	expect(t, "its provider unknown after a restart", f.sync("demo/foo"), writes{})

	f.setDown(m1, false)
	awaitSynced(t, f, m1)
	f.change(m1, export("foo", t0), "delete")
	expect(t, "export deleted", f.sync("demo/foo"), writes{m1: cleaned, m2: cleaned})
}
