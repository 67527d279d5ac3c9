package desired

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// families are the IP families of the derived Service, so that its VIPs
// reach the providers' endpoints: kube-proxy routes a VIP of one family to
// the imported endpoints of that family only.
//
//   - Every provider has the one family F: SingleStack [F], so that an IPv6
//     service gets an IPv6 VIP in a dual-stack consumer whose first family
//     is IPv4. A consumer without F refuses it, rightly: its pods could not
//     reach the endpoints (the condition says so).
//   - The providers have both families between them: PreferDualStack, the
//     families left to the consumer, which gives a VIP of each family it
//     has; naming them would make a single-stack consumer refuse the
//     Service rather than give it the VIP it can.
//   - No provider states its families (an API server before dual-stack):
//     nil, the consumer's defaults.
//
// Providers whose families differ from the oldest's conflict
// (IPFamilyConflict, as KEP-1645 asks): a client of one family reaches
// only the endpoints of that family.
func (p *Plan) families(cands []candidate) (*corev1.IPFamilyPolicy, []corev1.IPFamily) {
	all := allFamilies(cands)
	oldest := familySet(cands[0].svc)
	for _, c := range cands {
		if fs := familySet(c.svc); len(fs) > 0 && len(oldest) > 0 && !slices.Equal(fs, oldest) {
			p.conflict(c.cluster, mcsv1b1.ServiceExportReasonIPFamilyConflict, fmt.Sprintf("%s's Service has the IP families %v, but the oldest export's (%s) %v: a client of one family reaches only the endpoints of that family", c.cluster, fs, cands[0].cluster, oldest))
		}
	}
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return ptr.To(corev1.IPFamilyPolicySingleStack), all
	default:
		return ptr.To(corev1.IPFamilyPolicyPreferDualStack), nil
	}
}

// allFamilies are the families of the providers' Services, each once, the
// oldest's first.
func allFamilies(cands []candidate) []corev1.IPFamily {
	var all []corev1.IPFamily
	for _, c := range cands {
		for _, f := range c.svc.Spec.IPFamilies {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	return all
}

// familySet is s's IP families, sorted.
func familySet(s *corev1.Service) []corev1.IPFamily {
	return slices.Sorted(slices.Values(s.Spec.IPFamilies))
}
