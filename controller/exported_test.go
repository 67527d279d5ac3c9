package controller

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// The oldest export's exportedLabels and exportedAnnotations are the
// import's (KEP-1645), but never the keys the controller uses itself; a
// newer export whose differ says LabelsConflict; a change is one update.
func TestExportedLabelsAndAnnotations(t *testing.T) {
	older := export("foo", t0)
	older.Spec.ExportedLabels = map[string]string{"team": "a", api.LabelManagedBy: "someone-else", api.LabelBucket: "99"}
	older.Spec.ExportedAnnotations = map[string]string{"note": "x", api.AnnotationStrategy: "LocalFirst"}
	newer := export("foo", t0.Add(time.Hour))
	newer.Spec.ExportedLabels = map[string]string{"team": "b"}
	newer.Spec.ExportedAnnotations = older.Spec.ExportedAnnotations
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), older},
		m2: {ns1(), service("foo", false, t0), slice("foo", "foo-2", 1, "10.2.0.1"), newer},
		m3: {ns1()},
	})
	f.sync("demo/foo")
	imp := f.importOf(m3, "foo")
	if want := map[string]string{"team": "a", api.LabelManagedBy: api.ManagedBy, api.LabelBucket: shards.Label(ns, "foo")}; !maps.Equal(imp.Labels, want) {
		t.Errorf("import labels %v, want %v", imp.Labels, want)
	}
	if want := map[string]string{"note": "x"}; !maps.Equal(imp.Annotations, want) {
		t.Errorf("import annotations %v, want %v", imp.Annotations, want)
	}
	exp := get(t, f.mcs[m2].MulticlusterV1beta1().ServiceExports(ns), m2, "foo")
	if c := meta.FindStatusCondition(exp.Status.Conditions, string(mcsv1b1.ServiceExportConditionConflict)); c == nil || c.Status != metav1.ConditionTrue || c.Reason != string(mcsv1b1.ServiceExportReasonLabelsConflict) {
		t.Errorf("member2's Conflict %+v, want True LabelsConflict", c)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})

	changed := older.DeepCopy()
	changed.Spec.ExportedLabels = map[string]string{"team": "b"}
	f.change(m1, changed, "update")
	// The import's Ready condition observes its new generation.
	one := []string{"update serviceimports demo/foo", "update serviceimports/status demo/foo"}
	// The exports agree now: their Conflict conditions clear.
	both := append(slices.Clone(one), "update serviceexports/status demo/foo")
	expect(t, "labels changed", f.sync("demo/foo"), writes{m1: both, m2: both, m3: one})
	if imp := f.importOf(m3, "foo"); imp.Labels["team"] != "b" {
		t.Errorf("import labels %v, want team=b", imp.Labels)
	}
}

// An import carries no more than desired.MaxExportedMetadata of exported
// labels and annotations: past it, none, and the export says why.
func TestExportedMetadataBounded(t *testing.T) {
	exp := export("foo", t0)
	exp.Spec.ExportedLabels = map[string]string{"team": "a"}
	exp.Spec.ExportedAnnotations = map[string]string{"note": strings.Repeat("x", desired.MaxExportedMetadata)}
	f := newFixture(t, world{m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), exp}, m2: {ns1()}})
	f.sync("demo/foo")
	imp := f.importOf(m2, "foo")
	if imp.Labels["team"] != "" || imp.Annotations["note"] != "" || len(imp.Spec.IPs) == 0 {
		t.Errorf("import labels %v, annotations %.80v, IPs %v; want none of the export's, imported", imp.Labels, imp.Annotations, imp.Spec.IPs)
	}
	got := f.exportOf(m1, "foo")
	if c := meta.FindStatusCondition(got.Status.Conditions, string(mcsv1b1.ServiceExportConditionConflict)); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "none are carried") {
		t.Errorf("member1's Conflict %+v, want True saying none are carried", c)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// An export without a Service, or of an ExternalName Service, is not
// valid, with the MCS API's reasons, and exports nothing.
func TestExportValid(t *testing.T) {
	external := service("foo", false, t0)
	external.Spec.Type, external.Spec.ExternalName, external.Spec.ClusterIP, external.Spec.ClusterIPs = corev1.ServiceTypeExternalName, "example.test", "", nil
	f := newFixture(t, world{
		m1: {ns1(), export("foo", t0)},
		m2: {ns1(), external, export("foo", t0)},
	})
	status := []string{"update serviceexports/status demo/foo"}
	expect(t, "sync", f.sync("demo/foo"), writes{m1: status, m2: status})
	for cluster, reason := range map[string]mcsv1b1.ServiceExportConditionReason{m1: mcsv1b1.ServiceExportReasonNoService, m2: mcsv1b1.ServiceExportReasonInvalidServiceType} {
		exp := get(t, f.mcs[cluster].MulticlusterV1beta1().ServiceExports(ns), cluster, "foo")
		if c := meta.FindStatusCondition(exp.Status.Conditions, "Valid"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != string(reason) {
			t.Errorf("%s's Valid %+v, want False %s", cluster, c, reason)
		}
	}
}

// The members' caches hold no more of an export's exportedLabels and
// exportedAnnotations than an import carries: the keys it carries, up to
// desired.MaxExportedMetadata, or none, with their size. The import
// carries the oldest export's all the same, and a newer export past the
// bound is told its size.
func TestExportedMetadataCutWhenCached(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	older := export("foo", t0)
	older.Spec.ExportedLabels = map[string]string{"team": "a"}
	older.Spec.ExportedAnnotations = map[string]string{"note": "x", api.AnnotationStrategy: mib}
	newer := export("foo", t0.Add(time.Hour))
	newer.Spec.ExportedAnnotations = map[string]string{"note": mib}
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), older},
		m2: {ns1(), service("foo", false, t0), slice("foo", "foo-2", 1, "10.2.0.1"), newer},
		m3: {ns1()},
	})
	f.sync("demo/foo")
	imp := f.importOf(m3, "foo")
	if imp.Labels["team"] != "a" || !maps.Equal(imp.Annotations, map[string]string{"note": "x"}) {
		t.Errorf("import labels %v, annotations %.80v; want team=a and note=x", imp.Labels, imp.Annotations)
	}
	exp := f.exportOf(m2, "foo")
	if c := meta.FindStatusCondition(exp.Status.Conditions, string(mcsv1b1.ServiceExportConditionConflict)); c == nil || c.Reason != string(mcsv1b1.ServiceExportReasonAnnotationsConflict) ||
		!strings.Contains(c.Message, fmt.Sprintf("take %d bytes, more than the %d a ServiceImport carries", len("note")+len(mib), desired.MaxExportedMetadata)) {
		t.Errorf("member2's Conflict %+v, want AnnotationsConflict stating the size", c)
	}
	for cluster, want := range map[string]map[string]string{m1: {"note": "x"}, m2: nil} {
		held := f.member(cluster).Export(ns, "foo")
		if n := api.MetadataBytes(held.Spec.ExportedLabels) + api.MetadataBytes(held.Spec.ExportedAnnotations); n > desired.MaxExportedMetadata || !maps.Equal(held.Spec.ExportedAnnotations, want) {
			t.Errorf("%s's cached export holds %d bytes of exported metadata, annotations %.80v; want at most %d, %v", cluster, n, held.Spec.ExportedAnnotations, desired.MaxExportedMetadata, want)
		}
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}
