package api

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// AnnotationProviderVIPs on the controller's ServiceImport holds the
// ClusterIPs of its provider Services, in the failover order:
// "<cluster>=<ip>[;<ip>],...". The mcs plugin reads no Service the
// controller writes, and every ServiceImport: a provider's VIP is known
// where the import is, and costs nothing to services without an order.
const AnnotationProviderVIPs = GroupName + "/provider-vips"

// FormatProviderVIPs writes AnnotationProviderVIPs' value: the clusters in
// the order given, each with its IPs; a cluster without IPs is left out.
func FormatProviderVIPs(order []string, ips map[string][]string) string {
	var parts []string
	for _, c := range order {
		if len(ips[c]) > 0 {
			parts = append(parts, c+"="+strings.Join(ips[c], ";"))
		}
	}
	return strings.Join(parts, ",")
}

// ParseProviderVIPs reads AnnotationProviderVIPs' value into the IPs of
// each cluster; a part that does not parse is left out.
func ParseProviderVIPs(v string) map[string][]string {
	if v == "" {
		return nil
	}
	out := map[string][]string{}
	for part := range strings.SplitSeq(v, ",") {
		c, ips, ok := strings.Cut(part, "=")
		if ok && c != "" && ips != "" {
			out[c] = strings.Split(ips, ";")
		}
	}
	return out
}

// A provider's Service: for a service whose LocalFirst names a failover
// order, mcs-controller writes into each consumption cluster, beside
// derived-<svc>, one ClusterIP Service per provider in the order, whose
// slices hold that provider's endpoints alone. The mcs plugin answers its
// VIP when LocalFirst falls below its minimum with answer vip, so that
// kube-proxy routes to the first ordered provider only.
const (
	// ProviderPrefix starts a provider Service's name: derived-0 and
	// twenty hex digits of a hash of the service and the provider. A
	// Service's name starts with a letter, so no derived-<svc> can be
	// one; the hash keeps it within the 63 characters of a Service name
	// whatever the service and cluster, and apart from every other pair's.
	ProviderPrefix = DerivedPrefix + "0"
	// ProviderSlicePrefix + an imported slice's name is its copy for the
	// provider Service: the dot cannot be in a cluster's name, so no
	// imported-<cluster>-<slice> can be one.
	ProviderSlicePrefix = ImportedPrefix + "p."
)

// ProviderService is the name of the Service that routes to cluster's
// endpoints of service svc alone.
func ProviderService(svc, cluster string) string {
	sum := sha256.Sum256([]byte(svc + "/" + cluster))
	return ProviderPrefix + hex.EncodeToString(sum[:])[:20]
}

// IsProviderService reports whether name is shaped as a provider
// Service's.
func IsProviderService(name string) bool {
	return strings.HasPrefix(name, ProviderPrefix) && len(name) == len(ProviderPrefix)+20
}

// ImportedSelector is the label selector of the slices imported for
// service svc: those joined to derived-<svc>, not the copies a provider
// Service routes to, whose endpoints are the same.
func ImportedSelector(svc string) string {
	return mcsv1b1.LabelServiceName + "=" + svc + "," + discoveryv1.LabelServiceName + "=" + DerivedPrefix + svc
}
