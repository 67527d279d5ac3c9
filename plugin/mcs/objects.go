package mcs

import (
	"net"
	"strconv"
	"strings"
	"time"
	"unique"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The informers store these small immutable structs instead of API objects:
// they keep only what answers need, so 10k services × clusters × endpoints
// fit in little memory, and the index points at them without copying.

// objMeta is the identity every trimmed object keeps so that the informer's
// store can key it (meta.Accessor accepts an ObjectMetaAccessor).
type objMeta struct {
	namespace, name, resourceVersion string
}

func (o *objMeta) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: o.namespace, Name: o.name, ResourceVersion: o.resourceVersion}
}

func metaOf(m *metav1.ObjectMeta) objMeta {
	return objMeta{namespace: intern(m.Namespace), name: m.Name, resourceVersion: m.ResourceVersion}
}

// intern returns the one copy of s that every trimmed object shares. It is
// for the strings that tens of thousands of objects repeat (namespaces,
// source clusters, port names and protocols), not for names, which would
// cost the table more than they save.
func intern(s string) string { return unique.Make(s).Value() }

// port is a service, import or slice port; name and protocol are lower-case
// because SRV labels match case-insensitively.
type port struct {
	name, protocol string
	port           int32
}

// matches reports whether p answers an SRV name asking for port name and
// protocol; "" asks for any.
func (p port) matches(name, protocol string) bool {
	return (name == "" || p.name == name) && (protocol == "" || p.protocol == protocol)
}

type service struct {
	objMeta
	headless bool
	ips      []net.IP
	ports    []port
}

type serviceImport struct {
	objMeta
	headless bool
	ips      []net.IP
	ports    []port
	strategy api.Strategy // from the annotation; "" when absent or not a api.Strategy
	// LocalFirst's policy, from its annotations: the fewest ready local
	// endpoints that answer (0: the default, 1), and the clusters that take
	// over in order.
	minReady int
	failover []string
}

type endpointSlice struct {
	objMeta
	service  string // the (multi-cluster) service the slice belongs to
	imported bool
	wide     bool   // addrs holds 16 bytes an address, else 4 (see endpoints.go)
	cluster  string // source cluster of an imported slice
	ports    []port
	// The ready endpoints, read through endpoint and all: their addresses
	// back to back, and their hostnames when one is not its address dashed.
	addrs []byte
	hosts []string
}

// sameObject reports whether o is a version of the same EndpointSlice.
func (s *endpointSlice) sameObject(o *endpointSlice) bool {
	return s.namespace == o.namespace && s.name == o.name
}

type lease struct {
	objMeta
	cluster string
	expiry  time.Time // zero: the Lease says nothing about its holder's liveness
}

type namespace struct{ objMeta }

// trim is the informers' transform: it converts API objects to the structs
// above. Anything else (already trimmed objects, tombstones) passes unchanged,
// which keeps it idempotent as client-go requires.
func trim(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return toService(o), nil
	case *discoveryv1.EndpointSlice:
		return toSlice(o), nil
	case *mcsv1b1.ServiceImport:
		return toImport(&o.ObjectMeta, o.Spec.Type == mcsv1b1.Headless, o.Spec.IPs, betaPorts(o.Spec.Ports)), nil
	case *mcsv1a1.ServiceImport:
		return toImport(&o.ObjectMeta, o.Spec.Type == mcsv1a1.Headless, o.Spec.IPs, alphaPorts(o.Spec.Ports)), nil
	case *coordv1.Lease:
		return toLease(o), nil
	case *corev1.Namespace:
		return &namespace{objMeta: metaOf(&o.ObjectMeta)}, nil
	}
	return obj, nil
}

func toService(s *corev1.Service) *service {
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 && s.Spec.ClusterIP != "" {
		ips = []string{s.Spec.ClusterIP}
	}
	out := &service{objMeta: metaOf(&s.ObjectMeta), headless: s.Spec.ClusterIP == corev1.ClusterIPNone}
	if !out.headless {
		out.ips = parseIPs(ips)
	}
	for _, p := range s.Spec.Ports {
		out.ports = append(out.ports, newPort(p.Name, string(p.Protocol), p.Port))
	}
	return out
}

func toImport(m *metav1.ObjectMeta, headless bool, ips []string, ports []port) *serviceImport {
	s, _ := api.ParseStrategy(m.Annotations[api.AnnotationStrategy])
	imp := &serviceImport{objMeta: metaOf(m), headless: headless, ips: parseIPs(ips), ports: ports, strategy: s}
	// A value that does not parse is left out: the default applies.
	if n, err := strconv.Atoi(m.Annotations[api.AnnotationMinReadyEndpoints]); err == nil && n >= 1 {
		imp.minReady = n
	}
	if order := m.Annotations[api.AnnotationFailoverOrder]; order != "" {
		imp.failover = strings.Split(order, ",")
	}
	return imp
}

func betaPorts(ps []mcsv1b1.ServicePort) []port {
	out := make([]port, 0, len(ps))
	for _, p := range ps {
		out = append(out, newPort(p.Name, string(p.Protocol), p.Port))
	}
	return out
}

func alphaPorts(ps []mcsv1a1.ServicePort) []port {
	out := make([]port, 0, len(ps))
	for _, p := range ps {
		out = append(out, newPort(p.Name, string(p.Protocol), p.Port))
	}
	return out
}

func newPort(name, protocol string, number int32) port {
	if protocol == "" {
		protocol = string(corev1.ProtocolTCP)
	}
	return port{name: intern(strings.ToLower(name)), protocol: intern(strings.ToLower(protocol)), port: number}
}

// toSlice keeps what answers need of an EndpointSlice. An imported slice
// whose source cluster is missing or not a DNS label gets no service, so the
// index leaves it out: its endpoints would be named <host>.<cluster>.<svc>…,
// which cannot be packed.
func toSlice(s *discoveryv1.EndpointSlice) *endpointSlice {
	out := &endpointSlice{objMeta: metaOf(&s.ObjectMeta)}
	if svc, ok := s.Labels[mcsv1b1.LabelServiceName]; ok {
		out.imported, out.cluster = true, intern(s.Labels[mcsv1b1.LabelSourceCluster])
		if len(validation.IsDNS1123Label(out.cluster)) == 0 {
			out.service = svc
		}
	} else {
		out.service = s.Labels[discoveryv1.LabelServiceName]
	}
	for _, p := range s.Ports {
		if p.Port == nil {
			continue
		}
		name, protocol := "", ""
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			protocol = string(*p.Protocol)
		}
		out.ports = append(out.ports, newPort(name, protocol, *p.Port))
	}
	out.setEndpoints(s.Endpoints)
	return out
}

func toLease(l *coordv1.Lease) *lease {
	out := &lease{objMeta: metaOf(&l.ObjectMeta)}
	if c, ok := strings.CutPrefix(l.Name, api.LeasePrefix); ok {
		out.cluster = c
	}
	if l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
		out.expiry = l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
	}
	return out
}

func parseIPs(ss []string) []net.IP {
	var out []net.IP
	for _, s := range ss {
		if ip := parseIP(s); ip != nil {
			out = append(out, ip)
		}
	}
	return out
}

// parseIP returns 4-byte IPv4 addresses so A records pack without conversion.
func parseIP(s string) net.IP {
	ip := net.ParseIP(s)
	if v4 := ip.To4(); v4 != nil {
		return v4
	}
	return ip
}
