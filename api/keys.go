// Package api holds the names both halves of coredns-mcs agree on: the
// labels, annotations and object names that mcs-controller writes into
// consumption clusters and the mcs CoreDNS plugin reads back. The labels that
// the MCS API and Kubernetes already define (multicluster.kubernetes.io/*,
// kubernetes.io/service-name, endpointslice.kubernetes.io/managed-by) are
// used from sigs.k8s.io/mcs-api and k8s.io/api, not repeated here.
//
// The MultiClusterService type is in the v1alpha1 package below.
package api

const (
	// GroupName is the API group of the hub's MultiClusterService.
	GroupName = "mcs.coredns-mcs.io"

	// ManagedBy is the value of the managed-by label
	// (endpointslice.kubernetes.io/managed-by on imported EndpointSlices,
	// LabelManagedBy on everything else) on every object mcs-controller
	// creates. Of Services, ServiceImports and EndpointSlices it updates and
	// deletes only those carrying it, and it never collects a slice that
	// carries it. Label or not, it also writes a user's ServiceImport (spec
	// type, ports and ips, status.clusters and the strategy annotation; ips
	// and clusters emptied when nothing provides the service; never
	// deleted), the status conditions of ServiceExports, the status and
	// finalizer of MultiClusterServices, the Leases source-<cluster>,
	// renewed by name, and on the hub the ConfigMaps export-ages.<ns>.<name>
	// of its namespace. It creates Namespaces but never changes or deletes
	// one. See controller/README.md, "What it writes".
	ManagedBy = "mcs-controller.coredns-mcs.io"

	// LabelManagedBy marks the objects other than EndpointSlices that
	// mcs-controller created: Services, ServiceImports, Namespaces, Leases.
	LabelManagedBy = "app.kubernetes.io/managed-by"

	// LabelBucket on every Service, ServiceImport and EndpointSlice
	// mcs-controller creates for a service is the service's bucket, 0 to
	// 63: a hash of its namespace/name, by which replicas share the
	// services (controller/shards). Others' objects do not carry it.
	LabelBucket = GroupName + "/bucket"

	// AnnotationStrategy on a ServiceImport enables native cluster.local
	// names for that service in that cluster; its value is a Strategy.
	AnnotationStrategy = GroupName + "/strategy"

	// AnnotationMinReadyEndpoints and AnnotationFailoverOrder on a
	// ServiceImport carry its MultiClusterService's spec.localFirst, when
	// set: the fewest ready endpoints of its own for which a cluster
	// answers them (a decimal, at least 1), and the provision clusters that
	// take over in order (their names, comma-separated).
	AnnotationMinReadyEndpoints = GroupName + "/min-ready-endpoints"
	AnnotationFailoverOrder     = GroupName + "/failover-order"

	// AnnotationSourceGeneration on an imported EndpointSlice is the
	// generation of the provision cluster's slice it was copied from.
	AnnotationSourceGeneration = GroupName + "/source-generation"

	// AnnotationFilled on a ServiceImport the controller did not create
	// says that it filled it in (value FilledSpec), and also added the
	// strategy annotation (FilledStrategy): what it takes back once
	// nothing provides the service. Another's import without it is never
	// written to.
	AnnotationFilled = GroupName + "/filled"
	FilledSpec       = "spec"
	FilledStrategy   = "spec,strategy"

	// AnnotationStale on an imported EndpointSlice says why its endpoints
	// are not ready: its source cluster is stale, and another cluster has
	// ready endpoints, so the VIP leaves it out as DNS answers do.
	AnnotationStale = GroupName + "/stale"

	// LabelCluster on a Secret in the controller's namespace registers a
	// member cluster by name; the Secret's KeyKubeconfig holds its kubeconfig.
	LabelCluster  = GroupName + "/cluster"
	KeyKubeconfig = "kubeconfig"
	// AnnotationExportNamespaces on such a Secret bounds the namespaces
	// the member may export from: a comma-separated list ("" for none).
	AnnotationExportNamespaces = GroupName + "/export-namespaces"
	// LabelExports = ExportsAllowed on a hub Namespace lets every member
	// that no bound narrows export from that namespace, under the
	// controller's default --default-export-namespaces=labelled.
	LabelExports   = GroupName + "/exports"
	ExportsAllowed = "allowed"
	// AnnotationCredentialExpires on such a Secret is when its token
	// expires (RFC 3339), as the member's API server answered the
	// TokenRequest that made it: kubectl mcs join and mcs-controller's
	// renewals write it.
	AnnotationCredentialExpires = GroupName + "/credential-expires"

	// LeaseNamespace holds the Leases source-<cluster> in every member.
	LeaseNamespace = "mcs-system"
	// LeasePrefix + a provision cluster's name is the Lease mcs-controller
	// renews in consumption clusters while it can watch that cluster.
	LeasePrefix = "source-"

	// DerivedPrefix + a service's name is the selector-less Service whose
	// ClusterIPs are the ServiceImport's spec.ips in a consumption cluster.
	DerivedPrefix = "derived-"

	// ImportedPrefix starts the name of every imported EndpointSlice:
	// imported-<source cluster>-<source slice>, with a hash appended when
	// that passes 253 characters or two sources would spell the same name.
	ImportedPrefix = "imported-"
)

// Strategy says which endpoints answer a native cluster.local name.
type Strategy string

const (
	// RemoteAndLocal spreads traffic over every provision cluster's ready
	// endpoints, this cluster's included.
	RemoteAndLocal Strategy = "RemoteAndLocal"
	// LocalFirst answers this cluster's endpoints while one is ready, and
	// the remote ones the moment none is.
	LocalFirst Strategy = "LocalFirst"
)

// NativeAnnotations are the ServiceImport annotations that turn native
// names on and tune them: the strategy, and LocalFirst's policy.
var NativeAnnotations = []string{AnnotationStrategy, AnnotationMinReadyEndpoints, AnnotationFailoverOrder}

// ParseStrategy reports whether s names a Strategy.
func ParseStrategy(s string) (Strategy, bool) {
	switch Strategy(s) {
	case RemoteAndLocal, LocalFirst:
		return Strategy(s), true
	}
	return "", false
}

// MetadataBytes is what labels or annotations take: their keys and
// values, as the API server counts them against its bounds.
func MetadataBytes(m map[string]string) int {
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	return n
}
