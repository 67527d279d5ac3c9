package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The exported Service's session affinity and traffic policies reach the
// ServiceImport and derived-<svc>, so kube-proxy does what the import
// says; a member whose ServiceImport CRD is older and drops those fields
// is written once, not at every sync.
func TestTrafficCarried(t *testing.T) {
	svc := ipService("foo", corev1.IPFamilyPolicySingleStack, corev1.IPv4Protocol)
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
	svc.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
	svc.Spec.TrafficDistribution = ptr.To("PreferClose")
	f := newFixture(t, world{
		m1: {ns1(), svc, slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	})
	// member3's CRD predates the fields: its API server drops them.
	f.mcs[m3].PrependReactor("*", "serviceimports", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if o, ok := a.(interface{ GetObject() runtime.Object }); ok {
			if imp, ok := o.GetObject().(*mcsv1b1.ServiceImport); ok {
				imp.Spec.SessionAffinity, imp.Spec.SessionAffinityConfig, imp.Spec.IPFamilies = "", nil, nil
				imp.Spec.InternalTrafficPolicy, imp.Spec.TrafficDistribution = nil, nil
			}
		}
		return false, nil, nil
	})
	f.sync("demo/foo")

	imp, d := f.importOf(m2, "foo"), f.serviceOf(m2, "derived-foo")
	// derived-foo's endpoints have no node in member2: Local would drop
	// every connection, so it routes Cluster-wide.
	for what, s := range map[string]struct {
		affinity corev1.ServiceAffinity
		timeout  int32
		itp      corev1.ServiceInternalTrafficPolicy
		td       string
		wantITP  corev1.ServiceInternalTrafficPolicy
	}{
		"import":      {imp.Spec.SessionAffinity, *imp.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, *imp.Spec.InternalTrafficPolicy, *imp.Spec.TrafficDistribution, corev1.ServiceInternalTrafficPolicyLocal},
		"derived-foo": {d.Spec.SessionAffinity, *d.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds, *d.Spec.InternalTrafficPolicy, *d.Spec.TrafficDistribution, corev1.ServiceInternalTrafficPolicyCluster},
	} {
		if s.affinity != corev1.ServiceAffinityClientIP || s.timeout != 60 || s.itp != s.wantITP || s.td != "PreferClose" {
			t.Errorf("member2's %s carries %+v, want ClientIP for 60 s, %s, PreferClose", what, s, s.wantITP)
		}
	}
	if len(imp.Spec.IPFamilies) != 1 || imp.Spec.IPFamilies[0] != corev1.IPv4Protocol {
		t.Errorf("member2's import ipFamilies %v, want derived-foo's [IPv4]", imp.Spec.IPFamilies)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
	f.restart()
	expect(t, "after a restart, member3 dropping the fields", f.sync("demo/foo"), writes{m3: {"update serviceimports demo/foo", "update serviceimports/status demo/foo"}})
	expect(t, "again", f.sync("demo/foo"), writes{})
}
