package controller

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The caches keep less than the objects hold (members/trim.go); what the
// controller writes back must still lose nothing on the API server. The
// fakes replace an object with what an update sends, as an API server does
// with a Service or the main resource of a MultiClusterService.

// userMeta is what a user's tools leave on an object: kubectl apply's
// annotation, a label, an owner.
func userMeta(m *metav1.ObjectMeta) {
	m.Labels = map[string]string{"team": "payments"}
	m.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: `{"kind":"…"}`}
	m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Application", Name: "payments", UID: "app-1"}}
}

// The finalizer's two updates keep the MultiClusterService's labels,
// annotations and owners, which its cache drops.
func TestFinalizerKeepsUserMetadata(t *testing.T) {
	mcs := multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, false)
	userMeta(&mcs.ObjectMeta)
	want := mcs.ObjectMeta.DeepCopy()
	f := newFixture(t, world{hub: {mcs}, m1: {service("foo", false, t0), slice("foo", "foo-abc", 1, "10.1.0.1")}})
	if got := f.sync("demo/foo")[hub]; !slices.Contains(got, "patch multiclusterservices demo/foo") {
		t.Fatalf("hub writes %v, want the finalizer added", got)
	}
	sameUserMeta(t, "after the finalizer was added", &f.mcsOf("foo").ObjectMeta, want)

	gone := f.mcsOf("foo")
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	f.change(hub, gone, "update")
	f.sync("demo/foo")
	got := f.mcsOf("foo")
	if len(got.Finalizers) != 0 {
		t.Fatalf("finalizers %v after the cleanup, want none", got.Finalizers)
	}
	sameUserMeta(t, "after the finalizer was removed", &got.ObjectMeta, want)
}

// An update of derived-<svc> keeps what a user added to it: a label the
// cache holds, or annotations past what it holds (members.MaxHeldMetadata),
// which the update reads afresh.
func TestDerivedServiceKeepsUserMetadata(t *testing.T) {
	for name, value := range map[string]string{"small": "true", "bulky": bulk()} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, world{
				hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
				m1:  {service("foo", false, t0), slice("foo", "foo-abc", 1, "10.1.0.1")},
			})
			f.sync("demo/foo")
			derived := f.serviceOf(m2, "derived-foo")
			derived.Annotations = map[string]string{"prometheus.io/scrape": value}
			f.change(m2, derived, "update")
			expect(t, "the annotation added", f.sync("demo/foo"), writes{})

			svc := service("foo", false, t0)
			svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)})
			f.change(m1, svc, "update")
			if got := f.sync("demo/foo")[m2]; !slices.Contains(got, "update services demo/derived-foo") {
				t.Fatalf("writes into %s %v, want derived-foo updated", m2, got)
			}
			got := f.serviceOf(m2, "derived-foo")
			if got.Annotations["prometheus.io/scrape"] != value || len(got.Spec.Ports) != 2 {
				t.Errorf("derived-foo's annotations %.80v, ports %v after the controller's update; want the user's kept and 2 ports", got.Annotations, got.Spec.Ports)
			}
			if _, marked := got.Annotations[members.AnnotationTrimmed]; marked {
				t.Errorf("derived-foo was written with the cache's mark %s", members.AnnotationTrimmed)
			}
			expect(t, "again", f.sync("demo/foo"), writes{})
		})
	}
}

// Another's ServiceImport with bulky annotations is filled in with them
// kept, and a bulky annotation on an imported slice, which is the
// controller's alone, is taken off once; neither is written again.
func TestBulkyMetadataOfImports(t *testing.T) {
	others := othersImport("foo")
	others.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: bulk()}
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1(), others},
	})
	f.sync("demo/foo")
	imp := f.importOf(m2, "foo")
	if imp.Annotations[corev1.LastAppliedConfigAnnotation] != others.Annotations[corev1.LastAppliedConfigAnnotation] || imp.Annotations[api.AnnotationFilled] == "" || len(imp.Spec.IPs) == 0 {
		t.Errorf("the other's import, filled in: annotations %.80v, spec %+v; want its own kept, filled", imp.Annotations, imp.Spec)
	}
	imported := f.sliceOf(m2, "imported-member1-foo-1")
	imported.Annotations = map[string]string{"junk": bulk()}
	f.change(m2, imported, "update")
	expect(t, "junk on the imported slice", f.sync("demo/foo"), writes{m2: {"update endpointslices demo/imported-member1-foo-1"}})
	if got := f.sliceOf(m2, "imported-member1-foo-1").Annotations; got["junk"] != "" || got[api.AnnotationSourceGeneration] != "1" {
		t.Errorf("the imported slice's annotations %.80v, want its source's generation only", got)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// bulk is an annotation's value past what the caches hold of one.
func bulk() string { return strings.Repeat("x", members.MaxHeldMetadata) }

func sameUserMeta(t *testing.T, step string, got, want *metav1.ObjectMeta) {
	t.Helper()
	if !maps.Equal(got.Labels, want.Labels) || !maps.Equal(got.Annotations, want.Annotations) || len(got.OwnerReferences) != 1 || got.OwnerReferences[0] != want.OwnerReferences[0] {
		t.Errorf("%s: labels %v, annotations %v, owners %v; want %v, %v, %v", step, got.Labels, got.Annotations, got.OwnerReferences, want.Labels, want.Annotations, want.OwnerReferences)
	}
}
