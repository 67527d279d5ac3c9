package desired

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// ExportCost is how many endpoints member m's export of the service would
// import into each consumer: those of its slices a Service can route to,
// at most maxEndpoints (importedSlices keeps no more), and none when the
// export cannot be used whatever the budget says (no Service, a namespace
// it may not export from, past its quota of exports or of ports). What
// it costs is what the provider's endpoint budget counts
// (controller/endpointbudget.go).
func ExportCost(m Member, maxEndpoints, maxPorts int) int {
	if !m.Known || m.Export == nil || m.Service == nil || m.NotAllowed != "" || m.OverQuota != "" || tooManyPorts(m.Service, maxPorts) {
		return 0
	}
	n := 0
	for _, s := range m.Slices {
		if s.AddressType != discoveryv1.AddressTypeFQDN {
			n += len(s.Endpoints)
		}
	}
	if maxEndpoints > 0 {
		n = min(n, maxEndpoints)
	}
	return n
}

// tooManyPorts reports whether svc has more ports than an import may.
func tooManyPorts(svc *corev1.Service, maxPorts int) bool {
	return svc != nil && maxPorts > 0 && len(svc.Spec.Ports) > maxPorts
}
