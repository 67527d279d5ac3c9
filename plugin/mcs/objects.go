package mcs

import (
	"encoding/binary"
	"iter"
	"net"
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
	"github.com/coredns-mcs/coredns-mcs/plugin/mcs/decide"
)

// The informers store these small immutable structs instead of API objects:
// they keep only what answers need, so 10k services × clusters × endpoints
// fit in little memory, and the index points at them without copying.

// objMeta is the identity every trimmed object keeps so that the informer's
// store can key it (meta.Accessor accepts an ObjectMetaAccessor). It is one
// string, the store's key ("namespace/name", the name alone for a
// cluster-scoped object) followed by the resourceVersion: a fleet's store
// holds hundreds of thousands of objects, and three strings each, with the
// key the store built besides, were a fifth of the plugin's memory.
type objMeta struct {
	id            string
	nsLen, keyLen uint32
}

func newMeta(namespace, name, resourceVersion string) objMeta {
	if namespace == "" {
		return objMeta{id: name + resourceVersion, keyLen: uint32(len(name))} // #nosec G115 -- names are bounded by the API server, far below 4 GiB
	}
	return objMeta{id: namespace + "/" + name + resourceVersion, nsLen: uint32(len(namespace)), keyLen: uint32(len(namespace) + 1 + len(name))} // #nosec G115 -- as above
}

func metaOf(m *metav1.ObjectMeta) objMeta { return newMeta(m.Namespace, m.Name, m.ResourceVersion) }

// GetObjectMeta gives the key as the name, in no namespace, so that
// client-go's key function returns the key this object holds rather than
// building another: the store's key is the same text either way. The
// informer reads nothing else but the resourceVersion (no informer here has
// an index by namespace, which would file every object under none); this
// code reads namespace and name.
func (o *objMeta) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: o.key(), ResourceVersion: o.id[o.keyLen:]}
}

func (o *objMeta) key() string       { return o.id[:o.keyLen] }
func (o *objMeta) namespace() string { return o.id[:o.nsLen] }

func (o *objMeta) name() string {
	if o.nsLen == 0 {
		return o.key()
	}
	return o.id[o.nsLen+1 : o.keyLen]
}

// intern returns the one copy of s that every trimmed object shares. It is
// for the strings that tens of thousands of objects repeat (source
// clusters), not for names, which would cost the table more than they save.
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

// portList is an object's ports, encoded and interned: a fleet's slices
// and imports repeat a few lists of ports, which each held a copy of. Each
// port is its name's length, its name, its protocol's length, its protocol
// and its number in four bytes.
type portList struct{ h unique.Handle[string] }

func newPortList(ps []port) portList {
	var b []byte
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(len(p.name)))
		b = append(b, p.name...)
		b = binary.AppendUvarint(b, uint64(len(p.protocol)))
		b = append(b, p.protocol...)
		b = binary.BigEndian.AppendUint32(b, uint32(p.port)) // #nosec G115 -- a port number, back as int32 below
	}
	return portList{unique.Make(string(b))}
}

// all are the ports in order; their names and protocols share the list's
// memory.
func (l portList) all() iter.Seq[port] {
	return func(yield func(port) bool) {
		if l.h == (unique.Handle[string]{}) {
			return
		}
		for s := l.h.Value(); s != ""; {
			var p port
			p.name, s = cutCounted(s)
			p.protocol, s = cutCounted(s)
			p.port = int32(binary.BigEndian.Uint32([]byte(s[:4]))) // #nosec G115 -- written from an int32
			if s = s[4:]; !yield(p) {
				return
			}
		}
	}
}

// cutCounted splits off the front of s a string its length precedes.
func cutCounted(s string) (string, string) {
	n, w := binary.Uvarint([]byte(s[:min(len(s), binary.MaxVarintLen64)]))
	s = s[w:]
	return s[:n], s[n:]
}

type service struct {
	objMeta
	headless bool
	ips      []net.IP
	ports    portList
}

type serviceImport struct {
	objMeta
	headless bool
	ips      []net.IP
	ports    portList
	strategy api.Strategy  // from the annotation; "" when absent or not a api.Strategy
	policy   decide.Policy // LocalFirst's, from its annotations
	// providerVIPs are the VIPs of the provider Services of the failover
	// order, by cluster (api.AnnotationProviderVIPs); nil without one.
	providerVIPs map[string][]net.IP
}

type endpointSlice struct {
	objMeta
	service string // the (multi-cluster) service the slice belongs to
	cluster string // source cluster of an imported slice
	ports   portList
	// The ready endpoints, read through endpoint and all: their addresses
	// back to back, and their hostnames when one is not its address dashed.
	// hosts is a pointer because most slices have none, and a fleet has
	// so many slices that 16 bytes more each move them all to a larger
	// size class.
	addrs    []byte
	hosts    *[]string
	zones    *[]string // their topology zones, only where kept (keepZones) and one has a zone
	imported bool
	wide     bool // addrs holds 16 bytes an address, else 4 (see endpoints.go)
}

// sameObject reports whether o is a version of the same EndpointSlice.
func (s *endpointSlice) sameObject(o *endpointSlice) bool {
	return s.key() == o.key()
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
func trim(obj any) (any, error) { return trimmer(false)(obj) }

// trimmer is trim, keeping the endpoints' topology zones with keepZones:
// only the kubernetes plugin's zonal names need them (README.md, "Zonal
// names"), and elsewhere they would cost 16 bytes an endpoint.
func trimmer(keepZones bool) func(any) (any, error) {
	return func(obj any) (any, error) { return trimObject(obj, keepZones) }
}

func trimObject(obj any, keepZones bool) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return toService(o), nil
	case *discoveryv1.EndpointSlice:
		return toSlice(o, keepZones), nil
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
	ports := make([]port, 0, len(s.Spec.Ports))
	for _, p := range s.Spec.Ports {
		ports = append(ports, newPort(p.Name, string(p.Protocol), p.Port))
	}
	out.ports = newPortList(ports)
	return out
}

func toImport(m *metav1.ObjectMeta, headless bool, ips []string, ports portList) *serviceImport {
	s, _ := api.ParseStrategy(m.Annotations[api.AnnotationStrategy])
	return &serviceImport{
		objMeta: metaOf(m), headless: headless, ips: parseIPs(ips), ports: ports, strategy: s, policy: decide.PolicyOf(m.Annotations),
		providerVIPs: providerVIPsOf(m.Annotations[api.AnnotationProviderVIPs]),
	}
}

// providerVIPsOf reads api.AnnotationProviderVIPs: an address that does
// not parse is left out, and a cluster left without one.
func providerVIPsOf(v string) map[string][]net.IP {
	var out map[string][]net.IP
	for c, ips := range api.ParseProviderVIPs(v) {
		if parsed := parseIPs(ips); len(parsed) > 0 {
			if out == nil {
				out = map[string][]net.IP{}
			}
			out[c] = parsed
		}
	}
	return out
}

func betaPorts(ps []mcsv1b1.ServicePort) portList {
	out := make([]port, 0, len(ps))
	for _, p := range ps {
		out = append(out, newPort(p.Name, string(p.Protocol), p.Port))
	}
	return newPortList(out)
}

func alphaPorts(ps []mcsv1a1.ServicePort) portList {
	out := make([]port, 0, len(ps))
	for _, p := range ps {
		out = append(out, newPort(p.Name, string(p.Protocol), p.Port))
	}
	return newPortList(out)
}

func newPort(name, protocol string, number int32) port {
	if protocol == "" {
		protocol = string(corev1.ProtocolTCP)
	}
	return port{name: strings.ToLower(name), protocol: strings.ToLower(protocol), port: number}
}

// toSlice keeps what answers need of an EndpointSlice. An imported slice
// gets no service, so the index leaves it out, when its source cluster is
// missing or not a DNS label (its endpoints would be named
// <host>.<cluster>.<svc>…, which cannot be packed), or when it is a
// provider Service's copy (its endpoints are the original's).
func toSlice(s *discoveryv1.EndpointSlice, keepZones bool) *endpointSlice {
	out := &endpointSlice{objMeta: metaOf(&s.ObjectMeta)}
	if svc, ok := s.Labels[mcsv1b1.LabelServiceName]; ok {
		out.imported, out.cluster = true, intern(s.Labels[mcsv1b1.LabelSourceCluster])
		if len(validation.IsDNS1123Label(out.cluster)) == 0 && !api.IsProviderService(s.Labels[discoveryv1.LabelServiceName]) {
			out.service = svc
		}
	} else {
		out.service = s.Labels[discoveryv1.LabelServiceName]
	}
	var ports []port
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
		ports = append(ports, newPort(name, protocol, *p.Port))
	}
	out.ports = newPortList(ports)
	out.setEndpoints(s.Endpoints, keepZones)
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
