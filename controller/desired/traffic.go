package desired

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Traffic is how the exported Service wants its traffic handled, which the
// ServiceImport carries (KEP-1645) and derived-<svc> applies, so that
// kube-proxy does what the import says. Unset fields mean the Kubernetes
// defaults: sessionAffinity None, internalTrafficPolicy Cluster, no
// trafficDistribution.
type Traffic struct {
	SessionAffinity       corev1.ServiceAffinity
	SessionAffinityConfig *corev1.SessionAffinityConfig
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy
	TrafficDistribution   *string
}

// TrafficOf is what s says of its traffic, in the terms of Traffic.
func TrafficOf(s *corev1.Service) Traffic {
	t := Traffic{
		SessionAffinity:       s.Spec.SessionAffinity,
		InternalTrafficPolicy: s.Spec.InternalTrafficPolicy,
		TrafficDistribution:   s.Spec.TrafficDistribution,
	}
	if t.SessionAffinity == corev1.ServiceAffinityClientIP {
		t.SessionAffinityConfig = s.Spec.SessionAffinityConfig
	}
	return t
}

// Same reports whether two say the same, defaults filled in as the API
// server fills them in.
func (t Traffic) Same(o Traffic) bool {
	a, b := t.defaulted(), o.defaulted()
	return a.SessionAffinity == b.SessionAffinity && equality.Semantic.DeepEqual(a.SessionAffinityConfig, b.SessionAffinityConfig) &&
		ptr.Equal(a.InternalTrafficPolicy, b.InternalTrafficPolicy) && ptr.Equal(a.TrafficDistribution, b.TrafficDistribution)
}

// defaultAffinityTimeout is what the API server gives a ClientIP affinity
// without a timeout (corev1.DefaultClientIPServiceAffinitySeconds).
const defaultAffinityTimeout = corev1.DefaultClientIPServiceAffinitySeconds

func (t Traffic) defaulted() Traffic {
	if t.SessionAffinity == "" {
		t.SessionAffinity = corev1.ServiceAffinityNone
	}
	if t.SessionAffinity == corev1.ServiceAffinityClientIP {
		timeout := defaultAffinityTimeout
		if c := t.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		t.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &timeout}}
	} else {
		t.SessionAffinityConfig = nil
	}
	if t.InternalTrafficPolicy == nil {
		t.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	return t
}

// traffic is the oldest export's traffic (KEP-1645: the oldest wins), and
// records each newer export that says otherwise as a conflict, by field.
func (p *Plan) traffic(cands []candidate) Traffic {
	oldest := TrafficOf(cands[0].svc)
	want := oldest.defaulted()
	for _, c := range cands[1:] {
		got := TrafficOf(c.svc).defaulted()
		for _, f := range []struct {
			reason     mcsv1b1.ServiceExportConditionReason
			field      string
			same       bool
			have, want any
		}{
			{mcsv1b1.ServiceExportReasonSessionAffinityConflict, "sessionAffinity", got.SessionAffinity == want.SessionAffinity, got.SessionAffinity, want.SessionAffinity},
			{mcsv1b1.ServiceExportReasonSessionAffinityConfigConflict, "sessionAffinityConfig.clientIP.timeoutSeconds", equality.Semantic.DeepEqual(got.SessionAffinityConfig, want.SessionAffinityConfig), timeout(got), timeout(want)},
			{mcsv1b1.ServiceExportReasonInternalTrafficPolicyConflict, "internalTrafficPolicy", ptr.Equal(got.InternalTrafficPolicy, want.InternalTrafficPolicy), *got.InternalTrafficPolicy, *want.InternalTrafficPolicy},
			{mcsv1b1.ServiceExportReasonTrafficDistributionConflict, "trafficDistribution", ptr.Equal(got.TrafficDistribution, want.TrafficDistribution), ptr.Deref(got.TrafficDistribution, "unset"), ptr.Deref(want.TrafficDistribution, "unset")},
		} {
			if !f.same {
				p.conflict(c.cluster, f.reason, fmt.Sprintf("%s's %s is %v, but the oldest export's (%s) is %v: the oldest one is used", c.cluster, f.field, f.have, cands[0].cluster, f.want))
			}
		}
	}
	return oldest
}

func timeout(t Traffic) any {
	if t.SessionAffinityConfig == nil {
		return "unset"
	}
	return *t.SessionAffinityConfig.ClientIP.TimeoutSeconds
}
