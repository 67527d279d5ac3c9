package members

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
)

var reachableGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_reachable",
	Help: "1 when the member cluster's API server answered the last probe, else 0.",
}, []string{"cluster"})

var writes = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "mcs_writes_total",
	Help: "API writes mcs-controller made, by cluster, kind, verb and result.",
}, []string{"cluster", "kind", "verb", "result"})

// A gauge rather than a counter: a refused Secret stays refused until it is
// fixed or deleted, and an alert should last as long.
var refusedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_registrations_refused",
	Help: "Member Secrets refused now, by reason: name, duplicate, invalid, plugin, local-file, insecure.",
}, []string{"reason"})

var objectsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_objects",
	Help: "Objects the controller holds of the member cluster (Services, EndpointSlices, Namespaces, ServiceExports, ServiceImports), as of its last probe.",
}, []string{"cluster"})

var objectsLimitGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_objects_limit",
	Help: "How many objects the controller may hold of the member cluster (--member-max-objects), past which it stops watching it; absent without a bound.",
}, []string{"cluster"})

var bytesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_bytes",
	Help: "About what the objects the controller holds of the member cluster take, counted as decoded, as of its last probe (bounded by --member-max-mib).",
}, []string{"cluster"})

var exportsRefusedGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_exports_refused",
	Help: "ServiceExports of the member cluster not used because it has more than --member-max-exports that can be used, as of its last probe.",
}, []string{"cluster"})

var expiryGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_credential_expiry_timestamp_seconds",
	Help: "When the credentials of the member's Secret expire (Unix time), as their token or client certificate says, else the Secret's annotation mcs.coredns-mcs.io/credential-expires; absent when unknown.",
}, []string{"cluster"})

var renewalGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "mcs_member_credential_renewal_timestamp_seconds",
	Help: "When the replica that renews member tokens renews the member's (Unix time): --renew-credentials-before ahead of its expiry, or, when that lead takes more than nine tenths of the token's lifetime (a cloud that caps tokens), once two thirds of the lifetime have passed; a time in the past is a renewal being retried. Absent when the controller does not renew them.",
}, []string{"cluster"})

func init() {
	legacyregistry.RawMustRegister(reachableGauge, writes, refusedGauge, objectsGauge, objectsLimitGauge, bytesGauge, exportsRefusedGauge, expiryGauge, renewalGauge)
}

// CountWrite counts one API write in mcs_writes_total.
func CountWrite(cluster, kind, verb string, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	writes.WithLabelValues(cluster, kind, verb, result).Inc()
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
