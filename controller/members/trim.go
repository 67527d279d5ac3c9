package members

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// What the informers keep of each object: their transforms. At fleet
// scale the controller's memory is what its caches hold, so each keeps
// exactly what a sync, an event handler or an index reads, and holds it
// packed (packed.go).
//
// The controller writes back some objects it read from the caches (an
// update sends the cached object with its changes): of those it keeps
// everything but managedFields, which an update that omits them leaves as
// they are, and labels and annotations past a bound (metadata.go). The
// others lose what nobody reads:
//
//   - Services and EndpointSlices that are not the controller's (without
//     its managed-by label) are never written: the providers' own, the
//     users'. Services keep what describes them to an importer
//     (desired/): type, clusterIP, ports, IP families, traffic; slices
//     their labels of the service and of who manages them, address type,
//     ports, and of each endpoint its addresses, conditions, hostname and
//     zone.
//   - ServiceExports are written through their status subresource, which
//     takes nothing from the request but the status: their metadata keeps
//     what identifies them, their creation (the oldest export wins) and
//     generation; their exportedLabels and exportedAnnotations no more
//     than an import carries (desired.CutExported).
//   - Namespaces are only looked up by name.
//   - The hub's MultiClusterServices lose their labels, annotations and
//     owners: their status is written through the subresource, and the
//     two updates of their finalizers read the object afresh
//     (controller/status.go).
//
// Status that the controller never reads goes from every Service (an
// update of a Service takes no status).

// trim is the transform of a member's informers: it cuts what no reader
// needs, and packs what is left (packed.go). v1alpha1 MCS API objects are
// stored as v1beta1 ones.
func trim(obj any) (any, error) {
	obj, err := mcsapi.ToBeta(obj)
	if err != nil {
		return nil, err
	}
	cut(obj)
	switch o := obj.(type) {
	case *corev1.Service:
		return pack(o, o.Labels[api.LabelManagedBy] == api.ManagedBy)
	case *discoveryv1.EndpointSlice:
		return pack(o, o.Labels[discoveryv1.LabelManagedBy] == api.ManagedBy)
	case *mcsv1b1.ServiceImport:
		return pack(o, ourImport(o))
	case *mcsv1b1.ServiceExport:
		return pack(o, false)
	}
	return obj, nil
}

// Trim is what the controller keeps of an object that a write into a
// member returned, in the cache's stead until the informer delivers it
// (controller/tracker.go): what the cache keeps. An initial sync holds
// its last half minute of writes so, thousands of objects.
func Trim(obj metav1.Object) metav1.Object { return kept(obj, trim) }

// TrimHubObject is Trim for an object that a write into the hub returned.
func TrimHubObject(obj metav1.Object) metav1.Object { return kept(obj, TrimHub) }

// kept is what transform makes of obj; obj, cut, when it cannot be packed.
func kept(obj metav1.Object, transform func(any) (any, error)) metav1.Object {
	if out, err := transform(obj); err == nil {
		if o, ok := out.(metav1.Object); ok {
			return o
		}
	}
	return obj
}

// cut drops from a member's object what no reader needs.
func cut(obj any) {
	switch o := obj.(type) {
	case *corev1.Service:
		cutService(o)
	case *discoveryv1.EndpointSlice:
		cutSlice(o)
	case *corev1.Namespace:
		*o = corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.Name, ResourceVersion: o.ResourceVersion}}
	case *mcsv1b1.ServiceExport:
		keepIdentity(&o.ObjectMeta, false)
		desired.CutExported(o)
	case *mcsv1b1.ServiceImport:
		o.ManagedFields = nil
		boundMetadata(&o.ObjectMeta)
	}
}

// TrimHub is the transform of the hub's informers: its
// MultiClusterServices and Services, packed.
func TrimHub(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1alpha1.MultiClusterService:
		keepIdentity(&o.ObjectMeta, true)
		return pack(o, false)
	case *corev1.Service:
		cutHubService(o)
		return pack(o, false)
	}
	return obj, nil
}

func cutService(s *corev1.Service) {
	s.Status = corev1.ServiceStatus{}
	if s.Labels[api.LabelManagedBy] == api.ManagedBy {
		s.ManagedFields = nil
		boundMetadata(&s.ObjectMeta)
		return
	}
	keepIdentity(&s.ObjectMeta, false)
	spec := s.Spec
	s.Spec = corev1.ServiceSpec{
		Type: spec.Type, ClusterIP: spec.ClusterIP, Ports: spec.Ports, IPFamilies: spec.IPFamilies,
		SessionAffinity: spec.SessionAffinity, SessionAffinityConfig: spec.SessionAffinityConfig,
		InternalTrafficPolicy: spec.InternalTrafficPolicy, TrafficDistribution: spec.TrafficDistribution,
	}
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].TargetPort, s.Spec.Ports[i].NodePort = intstr.IntOrString{}, 0
	}
}

// cutHubService keeps what a member gets of the hub's Service
// (desired.propagated).
func cutHubService(s *corev1.Service) {
	keepIdentity(&s.ObjectMeta, false)
	s.Spec = corev1.ServiceSpec{Selector: s.Spec.Selector, Ports: s.Spec.Ports, ClusterIP: s.Spec.ClusterIP}
	s.Status = corev1.ServiceStatus{}
}

func cutSlice(s *discoveryv1.EndpointSlice) {
	if s.Labels[discoveryv1.LabelManagedBy] == api.ManagedBy {
		s.ManagedFields = nil
		boundMetadata(&s.ObjectMeta)
		return
	}
	labels := s.Labels
	keepIdentity(&s.ObjectMeta, false)
	s.Labels = pick(labels, discoveryv1.LabelManagedBy, discoveryv1.LabelServiceName)
	// What an imported copy has of each endpoint (desired.Imported).
	for i, e := range s.Endpoints {
		s.Endpoints[i] = discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Hostname: e.Hostname, Zone: e.Zone}
	}
}

// keepIdentity keeps of an object's metadata its namespace, name,
// resourceVersion (the tracker compares it, an update sends it),
// creation, generation and deletion; and with uid, its UID and
// finalizers.
func keepIdentity(m *metav1.ObjectMeta, uid bool) {
	keep := metav1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, ResourceVersion: m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp, Generation: m.Generation,
		DeletionTimestamp: m.DeletionTimestamp, DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
	}
	if uid {
		keep.UID, keep.Finalizers = m.UID, m.Finalizers
	}
	*m = keep
}

// pick is the entries of m under keys.
func pick(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}
