package mcs

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// shape is what a query name names under its zone. The labels left of a
// service mean different things in the two kinds of zone: in a native zone
// one label is an endpoint's hostname or an _proto (no hostname starts
// with "_") and two are _port._proto (always, as in the kubernetes
// plugin); in the clusterset zone one label is a cluster id or an _proto,
// and two are hostname.clusterid unless either starts with "_", when they
// are _port._proto.
type shape int

const (
	shapeOther     shape = iota // the apex, or any name not under svc.<zone>
	shapeSvc                    // svc.<zone>
	shapeNamespace              // <ns>.svc.<zone>
	shapeService                // <svc>.<ns>.svc.<zone>
	shapeEndpoint               // <host>.<svc>… (native), <host>.<cluster>.<svc>… (clusterset)
	shapePort                   // _<port>._<proto>.<svc>…
	shapeCluster                // <cluster>.<svc>… (clusterset): names exist below it
	shapeProto                  // _<proto>.<svc>…: names may exist below it
	shapeZonal                  // <topology-zone>.pin|prefer._zone.<svc>… (native): the kubernetes plugin's zonal names
	shapeTooLong                // deeper than any record
)

// qname is a query name split into the labels the Kubernetes DNS schemas use.
type qname struct {
	shape     shape
	base      string // the name without the zone and its dot; "" at the apex
	namespace string
	service   string
	host      string // shapeEndpoint: the endpoint's hostname
	cluster   string // shapeEndpoint (clusterset), shapeCluster: a cluster id
	port      string // shapePort: the port name, without its "_"
	proto     string // shapePort, shapeProto: the protocol, without its "_"
	topoZone  string // shapeZonal: the topology zone, every label left of the directive
	prefer    bool   // shapeZonal: the directive prefer (else pin)
}

// parseName splits name (lower-case, fully qualified, inside zone) without
// allocating: the labels are substrings of name. Names with escaped
// characters match no Kubernetes object, so they are left as shapeOther.
func parseName(name, zone string) qname {
	base := strings.TrimSuffix(strings.TrimSuffix(name, zone), ".")
	q := qname{base: base}
	if base == "" || strings.IndexByte(base, '\\') >= 0 {
		return q
	}
	rest, l := cutLast(base)
	if l != "svc" {
		return q
	}
	q.shape = shapeSvc
	if rest == "" {
		return q
	}
	rest, q.namespace = cutLast(rest)
	q.shape = shapeNamespace
	if rest == "" {
		return q
	}
	rest, q.service = cutLast(rest)
	q.shape = shapeService
	if rest == "" {
		return q
	}
	rest, inner := cutLast(rest) // the label next to the service
	if rest == "" {
		q.oneLabel(inner, zone == clustersetZone)
		return q
	}
	rest, outer := cutLast(rest)
	if rest != "" {
		q.shape = shapeTooLong
		if inner == zonalLabel && (outer == "pin" || outer == "prefer") && zone != clustersetZone {
			q.shape, q.topoZone, q.prefer = shapeZonal, rest, outer == "prefer"
		}
		return q
	}
	q.twoLabels(outer, inner, zone == clustersetZone)
	return q
}

// zonalLabel anchors the kubernetes plugin's zonal names,
// <topology-zone>.pin|prefer._zone.<svc>.<ns>.svc.<zone>, which are not
// defined in the clusterset zone (its README, "Zonal Names").
const zonalLabel = "_zone"

// oneLabel files <label>.<svc>…: an _proto, else a hostname in a native
// zone and a cluster id in the clusterset zone.
func (q *qname) oneLabel(label string, clusterset bool) {
	switch proto, isProto := strings.CutPrefix(label, "_"); {
	case isProto:
		q.shape, q.proto = shapeProto, proto
	case !clusterset:
		q.shape, q.host = shapeEndpoint, label
	default:
		q.shape, q.cluster = shapeCluster, label
	}
}

// twoLabels files <outer>.<inner>.<svc>…: _port._proto, or in the clusterset
// zone hostname.clusterid when neither label starts with "_".
func (q *qname) twoLabels(outer, inner string, clusterset bool) {
	if clusterset && !strings.HasPrefix(outer, "_") && !strings.HasPrefix(inner, "_") {
		q.shape, q.host, q.cluster = shapeEndpoint, outer, inner
		return
	}
	q.shape = shapePort
	q.port, q.proto = strings.TrimPrefix(outer, "_"), strings.TrimPrefix(inner, "_")
}

// ofService reports whether q is a service's name or one below it, the
// names of native (and derived) answers.
func (q qname) ofService() bool {
	switch q.shape {
	case shapeService, shapeEndpoint, shapePort, shapeProto, shapeZonal:
		return true
	}
	return false
}

func cutLast(s string) (rest, label string) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+1:]
}

// possible reports whether q can name an object of a Kubernetes cluster:
// its namespace, service, hostname, cluster id and port name are DNS labels
// as Kubernetes requires of them, and its protocol is one a port can have.
// Before mcs has synced, only such a name may be one it answers: a search
// path's expansion of an external name (www.example.com.<ns>.svc.<zone>,
// "port" www, "protocol" example) never is, and goes on as it is.
func (q qname) possible() bool {
	if !isLabel(q.namespace) || q.shape != shapeNamespace && !isLabel(q.service) {
		return false
	}
	switch q.shape {
	case shapeEndpoint:
		return hostLabel(q.host) && (q.cluster == "" || isLabel(q.cluster))
	case shapeCluster:
		return isLabel(q.cluster)
	case shapePort:
		return isLabel(q.port) && isProtocol(q.proto)
	case shapeProto:
		return isProtocol(q.proto)
	}
	return q.shape == shapeNamespace || q.shape == shapeService || q.shape == shapeZonal
}

// isLabel reports whether l is a DNS-1123 label: what Kubernetes requires of
// a namespace, a Service (whose stricter DNS-1035 rule is being relaxed to
// this one), a port name and the source-cluster label mcs reads.
func isLabel(l string) bool { return len(validation.IsDNS1123Label(l)) == 0 }

// hostLabel reports whether h can be an endpoint's name: its hostname, a
// DNS-1123 label, or its address with "." and ":" turned into "-", which
// for IPv6 may start with "-" ("--1") and hold "a"-"f".
func hostLabel(h string) bool {
	return len(h) > 0 && len(h) <= validation.DNS1123LabelMaxLength &&
		strings.Trim(h, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// isProtocol reports whether p is a port's protocol, as mcs keeps it: the
// lower-case name of a Kubernetes protocol.
func isProtocol(p string) bool { return p == "tcp" || p == "udp" || p == "sctp" }
