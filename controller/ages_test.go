package controller

import (
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// A member controls the creationTimestamp of its export: one that claims
// an export older than the one already imported does not take the
// service's definition over. Ages are when the hub first saw each export,
// kept on the hub, so that a restart changes nothing.
func TestOldestExportAgedOnTheHub(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{Clock: fc}))
	f.sync("demo/foo")
	if w := f.writes()[hub]; len(w) != 0 {
		t.Errorf("one provider: hub writes %v, want none", w)
	}

	fc.Step(time.Minute)
	hostile := service("foo", false, t0.Add(-365*24*time.Hour))
	hostile.Spec.Ports[0].Port = 81
	f.change(m2, hostile, "create")
	f.change(m2, slice("foo", "foo-2", 1, "10.2.0.1"), "create")
	f.change(m2, export("foo", t0.Add(-365*24*time.Hour)), "create")
	expectHub(t, "a second export", f.sync("demo/foo"), "create configmaps mcs-system/export-ages.demo.foo")
	checkPort := func(when string) {
		t.Helper()
		if imp := f.importOf(m3, "foo"); len(imp.Spec.Ports) != 1 || imp.Spec.Ports[0].Port != 80 {
			t.Errorf("%s: import ports %+v, want member1's 80: the export the hub saw first", when, imp.Spec.Ports)
		}
	}
	checkPort("a second export")
	ages := f.agesOf("foo")
	want := map[string]string{m1: t0.Format(time.RFC3339Nano), m2: t0.Add(time.Minute).Format(time.RFC3339Nano)}
	if !maps.Equal(ages.Data, want) {
		t.Errorf("ages %v, want %v", ages.Data, want)
	}

	fc.Step(time.Hour)
	f.restart()
	expect(t, "after a restart", f.sync("demo/foo"), writes{})
	checkPort("after a restart")

	// Deleted or edited by someone else, the record comes back as it was.
	f.change(hub, ages, "delete")
	expect(t, "record deleted", f.sync("demo/foo"), writes{hub: {"create configmaps mcs-system/export-ages.demo.foo"}})
	edited := f.agesOf("foo")
	edited.Data[m2] = t0.Add(-time.Hour).Format(time.RFC3339Nano)
	f.change(hub, edited, "update")
	expect(t, "record edited", f.sync("demo/foo"), writes{hub: {"update configmaps mcs-system/export-ages.demo.foo"}})
	if got := f.agesOf("foo").Data; !maps.Equal(got, want) {
		t.Errorf("ages healed to %v, want %v", got, want)
	}
	checkPort("healed")

	// member1 leaves the service: one provider, nothing to keep.
	f.change(m1, export("foo", t0), "delete")
	expectHub(t, "one provider again", f.sync("demo/foo"), "delete configmaps mcs-system/export-ages.demo.foo")
}

// agesOf reads the hub's ages ConfigMap of service name.
func (f *fixture) agesOf(name string) *corev1.ConfigMap {
	f.t.Helper()
	cm, err := f.hubKube.CoreV1().ConfigMaps(controllerNamespace).Get(f.t.Context(), agesPrefix+ns+"."+name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return cm
}

// expectHub checks the writes of a sync into the hub alone.
func expectHub(t *testing.T, step string, got writes, want ...string) {
	t.Helper()
	if !slices.Equal(got[hub], want) {
		t.Errorf("%s: hub writes %v, want %v", step, got[hub], want)
	}
}
