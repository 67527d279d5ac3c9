package controller

import (
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// othersImport is a ServiceImport another MCS implementation wrote, filled
// in its own way.
func othersImport(name string) *mcsv1b1.ServiceImport {
	return &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: "others", Labels: map[string]string{"app.kubernetes.io/managed-by": "karmada"}},
		Spec:       mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP, IPs: []string{"10.99.0.1"}, Ports: []mcsv1b1.ServicePort{{Port: 80, Protocol: "TCP"}}},
		Status:     mcsv1b1.ServiceImportStatus{Clusters: []mcsv1b1.ClusterStatus{{Cluster: "elsewhere"}}},
	}
}

// Another implementation's ServiceImport that nothing here backs is never
// written to, however often it is synced.
func TestOthersImportLeftAlone(t *testing.T) {
	f := newFixture(t, world{m1: {ns1()}, m2: {ns1(), othersImport("karmada")}})
	expect(t, "sync", f.sync("demo/karmada"), writes{})
	if imp := f.importOf(m2, "karmada"); len(imp.Spec.IPs) != 1 || len(imp.Status.Clusters) != 1 {
		t.Errorf("the other's import was changed: %+v", imp)
	}
}

// An import the controller fills that is not its own owns nothing of the
// controller's (deleting it must not collect derived-<svc>); once nothing
// provides the service, the controller takes back what it filled in, and
// nothing else. It never adds the strategy annotation there, which would
// make coredns-mcs answer the service's cluster.local name from another's
// import.
func TestOthersImportFilledAndGivenBack(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.LocalFirst, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1(), othersImport("foo")},
	})
	expect(t, "sync", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2: {
			"create services demo/derived-foo",
			"update serviceimports demo/foo",
			"update serviceimports/status demo/foo",
			"create endpointslices demo/imported-member1-foo-1",
		},
	})
	if d := f.serviceOf(m2, "derived-foo"); len(d.OwnerReferences) != 0 || d.Labels[mcsv1b1.LabelServiceName] != "foo" {
		t.Errorf("derived-foo owners %v labels %v, want no owner and the service-name label", d.OwnerReferences, d.Labels)
	}
	if s := f.sliceOf(m2, "imported-member1-foo-1"); len(s.OwnerReferences) != 0 {
		t.Errorf("imported slice owners %v, want none", s.OwnerReferences)
	}
	imp := f.importOf(m2, "foo")
	if _, ok := imp.Annotations[api.AnnotationStrategy]; ok || imp.Annotations[api.AnnotationFilled] != api.FilledSpec || imp.Labels["app.kubernetes.io/managed-by"] != "karmada" {
		t.Errorf("filled import %+v", imp.ObjectMeta)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})

	gone := f.mcsOf("foo")
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	f.change(hub, gone, "update")
	expect(t, "deleted", f.sync("demo/foo"), writes{
		hub: {"patch multiclusterservices demo/foo"},
		m2:  {"delete endpointslices demo/imported-member1-foo-1", "delete services demo/derived-foo", "update serviceimports demo/foo", "update serviceimports/status demo/foo"},
	})
	imp = f.importOf(m2, "foo")
	if _, ok := imp.Annotations[api.AnnotationStrategy]; ok || len(imp.Annotations) != 0 || len(imp.Spec.IPs) != 0 || len(imp.Status.Clusters) != 0 || len(imp.Spec.Ports) != 1 {
		t.Errorf("import given back %+v %+v, want no annotations, IPs or clusters, its ports kept", imp.ObjectMeta, imp.Spec)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// The controller's import says whether it is ready (mcs-api v1beta1): once
// derived-<svc> has its VIP, observing the import's generation; not while
// the API server refuses derived-<svc>, and why.
func TestImportReady(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	})
	f.kube[m3].PrependReactor("create", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), "derived-foo",
			field.ErrorList{field.Invalid(field.NewPath("spec", "ipFamilies").Index(0), "IPv6", "not configured on this cluster")})
	})
	f.syncFailing("demo/foo", "not configured on this cluster")
	imp := f.importOf(m2, "foo")
	c := meta.FindStatusCondition(imp.Status.Conditions, "Ready")
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != "Ready" || c.ObservedGeneration != imp.Generation || imp.Status.EndpointSliceObjects != mcsv1b1.EndpointSliceObjectsPresent {
		t.Errorf("member2's import status %+v (generation %d), want Ready True at its generation, slices Present", imp.Status, imp.Generation)
	}
	c = meta.FindStatusCondition(f.importOf(m3, "foo").Status.Conditions, "Ready")
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "IPFamilyNotSupported" {
		t.Errorf("member3's Ready %+v, want False IPFamilyNotSupported", c)
	}
	expect(t, "again", f.syncFailing("demo/foo", "not configured on this cluster"), writes{}) // derived-foo refused again, nothing else to write
}

// LocalFirst's policy rides on the import as annotations: a change of it is
// one write per consumption cluster (the import; its status follows the
// generation; and the provider Services of an order), and without it the import is as before, the strategy alone.
func TestLocalFirstPolicyCarried(t *testing.T) {
	mcs := multiClusterService("foo", api.LocalFirst, []v1alpha1.ClusterName{m1, m3}, []v1alpha1.ClusterName{m2}, true)
	mcs.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{MinReadyEndpoints: ptr.To[int32](2), FailoverOrder: []v1alpha1.ClusterName{m3, m1}}
	f := newFixture(t, world{
		hub: {mcs},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
		m3:  {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1")},
	})
	f.sync("demo/foo")
	want := map[string]string{
		api.AnnotationStrategy: "LocalFirst", api.AnnotationMinReadyEndpoints: "2", api.AnnotationFailoverOrder: "member3,member1",
		api.AnnotationProviderVIPs: providerVIPs(f, m3, m1),
	}
	if got := f.importOf(m2, "foo").Annotations; !maps.Equal(got, want) {
		t.Errorf("import annotations %v, want %v", got, want)
	}

	mcs = f.mcsOf("foo")
	mcs.Spec.LocalFirst.FailoverOrder = nil
	f.change(hub, mcs, "update")
	expect(t, "order dropped", f.sync("demo/foo"), writes{ // the fake bumps no MultiClusterService generation
		m2: {
			"delete services demo/" + provider3, "delete services demo/" + provider1, // the order's provider Services (providers_test.go)
			"update serviceimports demo/foo", "update serviceimports/status demo/foo",
			"delete endpointslices demo/" + copy1, "delete endpointslices demo/" + copy3,
		},
	})
	delete(want, api.AnnotationFailoverOrder)
	delete(want, api.AnnotationProviderVIPs)
	if got := f.importOf(m2, "foo").Annotations; !maps.Equal(got, want) {
		t.Errorf("import annotations %v, want %v", got, want)
	}

}

// The strategy and LocalFirst's policy that an older controller added to
// another's import (api.FilledStrategy) are taken back at its next sync,
// the owner's annotations kept.
func TestStrategyTakenBackFromOthersImport(t *testing.T) {
	others := othersImport("foo")
	others.Annotations = map[string]string{
		api.AnnotationStrategy: "LocalFirst", api.AnnotationMinReadyEndpoints: "2", api.AnnotationFilled: api.FilledStrategy, "team": "shop",
	}
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.LocalFirst, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1(), others},
	})
	f.sync("demo/foo")
	want := map[string]string{api.AnnotationFilled: api.FilledSpec, "team": "shop"}
	if got := f.importOf(m2, "foo").Annotations; !maps.Equal(got, want) {
		t.Errorf("another's import annotated %v, want %v", got, want)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// A mutating webhook that adds a label and an annotation to every
// EndpointSlice makes the imported slices no different to the
// controller: only the keys it owns are compared, so a second sync
// writes nothing, and the webhook's keys stay when a slice is updated.
func TestWebhookKeysOnImportedSlices(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	})
	inject := func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if s, ok := o.GetObject().(*discoveryv1.EndpointSlice); ok && s.Namespace == ns {
				s.Labels = maps.Clone(s.Labels)
				s.Labels["webhook.example.com/injected"] = "yes"
				s.Annotations = maps.Clone(s.Annotations)
				if s.Annotations == nil {
					s.Annotations = map[string]string{}
				}
				s.Annotations["webhook.example.com/at"] = "admission"
			}
		}
		return false, nil, nil
	}
	f.kube[m2].PrependReactor("create", "endpointslices", inject)
	f.kube[m2].PrependReactor("update", "endpointslices", inject)
	f.sync("demo/foo")
	expect(t, "again", f.sync("demo/foo"), writes{})

	f.change(m1, slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.2"), "update")
	one := []string{"update endpointslices demo/imported-member1-foo-1"}
	expect(t, "a change", f.sync("demo/foo"), writes{m1: one, m2: one, m3: one})
	s := f.sliceOf(m2, "imported-member1-foo-1")
	if len(s.Endpoints) != 2 || s.Labels["webhook.example.com/injected"] != "yes" || s.Annotations[api.AnnotationSourceGeneration] != "2" {
		t.Errorf("member2's slice after the change: %d endpoints, labels %v, annotations %v; want 2, the webhook's label, generation 2", len(s.Endpoints), s.Labels, s.Annotations)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}
