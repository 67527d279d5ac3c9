package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// A member that no bound narrows exports only from the hub's namespaces
// (HubNamespaces): its export elsewhere imports nothing and says why, and
// is taken up once the operator makes the namespace on the hub. A member
// with a bound of its own exports by that bound alone.
func TestExportsFromHubNamespacesOnly(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1"), export("foo", t0)},
	}, withOptions(Options{DefaultExports: HubNamespaces}), withBounds(map[string][]string{m3: {ns}}))
	f.sync("demo/foo")
	f.exportsOnlyFrom(m3, "the hub has no namespace demo")
	f.hubChanges(ns1(), "create")
	f.exportsFromBoth()
}

// By default (LabelledHubNamespaces) a hub namespace allows exports only
// once the operator labels it: default and the add-ons' namespaces, which
// every hub has, stay closed to a member that no bound narrows, and
// taking the label off closes the namespace again.
func TestExportsFromLabelledHubNamespacesOnly(t *testing.T) {
	f := newFixture(t, world{
		hub: {ns1()},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2:  {ns1()},
		m3:  {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1"), export("foo", t0)},
	}, withOptions(Options{DefaultExports: LabelledHubNamespaces}), withBounds(map[string][]string{m3: {ns}}))
	f.sync("demo/foo")
	notLabelled := "labelled mcs.coredns-mcs.io/exports=allowed (--default-export-namespaces=labelled, as neither --export-namespaces nor the annotation mcs.coredns-mcs.io/export-namespaces of its Secret bounds it), and the hub's namespace demo is not"
	f.exportsOnlyFrom(m3, notLabelled)

	labelled := ns1().(*corev1.Namespace)
	labelled.Labels = map[string]string{api.LabelExports: api.ExportsAllowed}
	f.hubChanges(labelled, "update")
	f.exportsFromBoth()

	f.hubChanges(ns1(), "update")
	f.exportsOnlyFrom(m3, notLabelled)
}

// exportsOnlyFrom checks that member1's export of demo/foo says why not,
// and that member2 imports foo from bounded alone.
func (f *fixture) exportsOnlyFrom(bounded, why string) {
	f.t.Helper()
	if c := f.valid(m1); c.Reason != "NamespaceNotAllowed" || !strings.Contains(c.Message, why) {
		f.t.Errorf("member1's Valid %+v, want NamespaceNotAllowed: %s", c, why)
	}
	if c := f.valid(bounded); c.Status != metav1.ConditionTrue {
		f.t.Errorf("%s, bounded to demo, has Valid %+v", bounded, c)
	}
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 1 || imp.Status.Clusters[0].Cluster != bounded {
		f.t.Errorf("import's clusters %+v, want %s's alone", imp.Status.Clusters, bounded)
	}
}

// exportsFromBoth checks that member1's export of demo/foo is taken up.
func (f *fixture) exportsFromBoth() {
	f.t.Helper()
	if c := f.valid(m1); c.Status != metav1.ConditionTrue {
		f.t.Errorf("member1's Valid %+v once the hub allows its namespace", c)
	}
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 2 {
		f.t.Errorf("import's clusters %+v, want member1 and member3", imp.Status.Clusters)
	}
}

func (f *fixture) valid(cluster string) *metav1.Condition {
	return meta.FindStatusCondition(f.exportOf(cluster, "foo").Status.Conditions, string(mcsv1b1.ServiceExportConditionValid))
}

// hubChanges makes the change to a hub Namespace, waits for it to queue
// demo/foo, as the informer's handlers do once its cache has it, and
// syncs demo/foo.
func (f *fixture) hubChanges(namespace runtime.Object, verb string) {
	f.t.Helper()
	for queued(f.c, "demo/foo") {
	}
	f.change(hub, namespace, verb)
	err := wait.PollUntilContextTimeout(f.t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, "demo/foo"), nil
	})
	if err != nil {
		f.t.Fatalf("foo was not queued once the hub's namespace was %sd", verb)
	}
	f.sync("demo/foo")
}

// A MultiClusterService is the operator's choice on the hub: its
// providers need no label on its namespace, whatever the default; a
// member's own bound still holds.
func TestMultiClusterServiceNeedsNoLabel(t *testing.T) {
	f := newFixture(t, world{
		hub: {ns1(), multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1, m3}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
		m3:  {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1")},
	}, withOptions(Options{DefaultExports: LabelledHubNamespaces}), withBounds(map[string][]string{m3: {"elsewhere"}}))
	f.sync("demo/foo")
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 1 || imp.Status.Clusters[0].Cluster != m1 {
		t.Errorf("import's clusters %+v, want member1's alone: member3 is bounded elsewhere", imp.Status.Clusters)
	}
}
