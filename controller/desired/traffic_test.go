package desired

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The oldest export's traffic handling is the import's; a newer export
// that says otherwise conflicts on that field; defaults are no conflict.
func TestTraffic(t *testing.T) {
	clientIP := func(timeout *int32) func(*corev1.Service) {
		return func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
			if timeout != nil {
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: timeout}}
			}
		}
	}
	for _, tc := range []struct {
		name          string
		oldest, newer func(*corev1.Service)
		reason        mcsv1b1.ServiceExportConditionReason
		want          string
	}{
		{"defaults, spelled out or not", func(*corev1.Service) {}, func(s *corev1.Service) {
			s.Spec.SessionAffinity = corev1.ServiceAffinityNone
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
		}, "", ""},
		{"the default timeout, spelled out or not", clientIP(nil), clientIP(ptr.To[int32](10800)), "", ""},
		{"session affinity", clientIP(nil), func(*corev1.Service) {}, mcsv1b1.ServiceExportReasonSessionAffinityConflict, "new's sessionAffinity is None, but the oldest export's (old) is ClientIP"},
		{"timeout", clientIP(ptr.To[int32](60)), clientIP(nil), mcsv1b1.ServiceExportReasonSessionAffinityConfigConflict, "is 10800, but the oldest export's (old) is 60"},
		{"internal traffic policy", func(s *corev1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		}, func(*corev1.Service) {},
			mcsv1b1.ServiceExportReasonInternalTrafficPolicyConflict, "new's internalTrafficPolicy is Cluster, but the oldest export's (old) is Local"},
		{"traffic distribution", func(*corev1.Service) {}, func(s *corev1.Service) { s.Spec.TrafficDistribution = ptr.To("PreferClose") },
			mcsv1b1.ServiceExportReasonTrafficDistributionConflict, "new's trafficDistribution is PreferClose, but the oldest export's (old) is unset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, newer := svc(false, port("http", 80, "")), svc(false, port("http", 80, ""))
			tc.oldest(old)
			tc.newer(newer)
			p := Compute(&Input{Name: "foo", Members: map[string]Member{
				"old": {Known: true, Service: old, Export: exportAt(0)},
				"new": {Known: true, Service: newer, Export: exportAt(1)},
			}})
			if p.Import == nil || !p.Import.Traffic.Same(TrafficOf(old)) {
				t.Fatalf("import %+v, want the oldest's traffic", p.Import)
			}
			c, ok := p.Conflicts["new"]
			if ok != (tc.reason != "") || c.Reason != tc.reason || !strings.Contains(c.Message, tc.want) {
				t.Errorf("conflict %+v, want %q saying %q", c, tc.reason, tc.want)
			}
		})
	}
}
