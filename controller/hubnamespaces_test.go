package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// By default a member that no bound narrows exports only from the
// namespaces the hub has: its export elsewhere imports nothing and says
// why, and is taken up once the operator makes the namespace on the hub.
// A member with a bound of its own exports by that bound alone.
func TestExportsFromHubNamespacesOnly(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1"), export("foo", t0)},
	}, withOptions(Options{HubNamespacesOnly: true}), withBounds(map[string][]string{m3: {ns}}))
	f.sync("demo/foo")
	valid := func(cluster string) *metav1.Condition {
		return meta.FindStatusCondition(f.exportOf(cluster, "foo").Status.Conditions, string(mcsv1b1.ServiceExportConditionValid))
	}
	if c := valid(m1); c.Reason != "NamespaceNotAllowed" || !strings.Contains(c.Message, "the hub has no namespace demo") {
		t.Errorf("member1's Valid %+v, want NamespaceNotAllowed: the hub has no namespace demo", c)
	}
	if c := valid(m3); c.Status != metav1.ConditionTrue {
		t.Errorf("member3, bounded to demo, has Valid %+v", c)
	}
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 1 || imp.Status.Clusters[0].Cluster != m3 {
		t.Errorf("import's clusters %+v, want member3's alone", imp.Status.Clusters)
	}

	for queued(f.c, "demo/foo") {
	}
	f.change(hub, ns1(), "create")
	// The informer's handlers run after its cache has the namespace.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, "demo/foo"), nil
	})
	if err != nil {
		t.Fatal("foo was not queued once the hub had its namespace")
	}
	f.sync("demo/foo")
	if c := valid(m1); c.Status != metav1.ConditionTrue {
		t.Errorf("member1's Valid %+v once the hub has the namespace", c)
	}
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 2 {
		t.Errorf("import's clusters %+v, want member1 and member3", imp.Status.Clusters)
	}
}
