package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A member past --member-max-exports has its newest exports refused, and
// keeps the older ones imported; once an older one goes, the newest
// refused takes its place without anything else queueing it.
func TestTooManyExports(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(),
			service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0),
			service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2"), export("bar", t0.Add(time.Hour)),
		},
		m2: {ns1()},
	}, withMaxExports(1))
	f.sync("demo/foo")
	if f.importOf(m2, "foo") == nil {
		t.Fatal("the oldest export, within the bound, is not imported")
	}
	expect(t, "the newest export", f.sync("demo/bar"), writes{m1: {"update serviceexports/status demo/bar"}})
	exp := f.exportOf(m1, "bar")
	if c := meta.FindStatusCondition(exp.Status.Conditions, string(mcsv1b1.ServiceExportConditionValid)); c == nil || c.Reason != "TooManyExports" || !strings.Contains(c.Message, "--member-max-exports") {
		t.Errorf("bar's Valid condition %+v, want False TooManyExports naming the flag", c)
	}

	for queued(f.c, "demo/bar") {
	}
	f.change(m1, export("foo", t0), "delete")
	// The informer's handlers run after its cache has the deletion.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, "demo/bar"), nil
	})
	if err != nil {
		t.Fatal("bar was not queued once foo's export, older, went")
	}
	f.sync("demo/foo")
	f.sync("demo/bar")
	f.importOf(m2, "bar") // fails the test when absent
	if _, err := f.mcs[m2].MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), "foo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("foo, no longer exported, is still imported: %v", err)
	}
}

// Exports that can never be used count against no quota: a tenant's junk
// (an export with no Service, of an ExternalName Service, from a
// namespace the member may not export from) made first does not push out
// a newer export that can be used. Each counts, and moves the newer one
// across the bound, once it can be used: its namespace made on the hub;
// and no longer once its Service goes.
func TestJunkExportsNotCounted(t *testing.T) {
	external := service("external", false, t0)
	external.Spec.Type, external.Spec.ExternalName, external.Spec.ClusterIP, external.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "example.test", "", nil
	stray, straySvc := export("stray", t0.Add(2*time.Minute)), service("stray", false, t0)
	stray.Namespace, straySvc.Namespace = "elsewhere", "elsewhere"
	f := newFixture(t, world{
		hub: {ns1()},
		m1: {ns1(),
			export("nosvc", t0),
			external, export("external", t0.Add(time.Minute)),
			straySvc, stray,
			service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0.Add(time.Hour)),
		},
		m2: {ns1()},
	}, withOptions(Options{DefaultExports: HubNamespaces}), withMaxExports(1))
	imported := []string{"create serviceimports demo/foo", "create services demo/derived-foo", "update serviceimports demo/foo", "update serviceimports/status demo/foo", "create endpointslices demo/imported-member1-foo-1"}
	status := "update serviceexports/status demo/foo"
	expect(t, "the newest export, the only one that can be used", f.sync("demo/foo"), writes{
		m1: append(slices.Clone(imported), status), m2: imported, m3: append([]string{"create namespaces demo"}, imported...),
	})
	for _, name := range []string{"nosvc", "external"} {
		f.sync("demo/" + name)
		if c := meta.FindStatusCondition(f.exportOf(m1, name).Status.Conditions, string(mcsv1b1.ServiceExportConditionValid)); c == nil || c.Reason == "TooManyExports" {
			t.Errorf("%s's Valid %+v, want why it cannot be used", name, c)
		}
	}

	waitQueued := func(step string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return queued(f.c, "demo/foo"), nil
		})
		if err != nil {
			t.Fatalf("%s: foo was not queued", step)
		}
	}
	for queued(f.c, "demo/foo") {
	}
	f.change(hub, &corev1.Namespace{ObjectMeta: metaName("elsewhere")}, "create")
	waitQueued("the stray export's namespace made on the hub")
	gone := []string{"delete endpointslices demo/imported-member1-foo-1", "delete services demo/derived-foo", "delete serviceimports demo/foo"}
	expect(t, "an older export counts", f.sync("demo/foo"), writes{m1: append(slices.Clone(gone), status), m2: gone, m3: gone})

	for queued(f.c, "demo/foo") {
	}
	f.change(m1, straySvc, "delete")
	waitQueued("the stray export's Service deleted")
	expect(t, "the older export counts no more", f.sync("demo/foo"), writes{m1: append(slices.Clone(imported), status), m2: imported, m3: imported})
}
