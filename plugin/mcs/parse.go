package mcs

import "strings"

// shape is where a query name sits under its zone.
type shape int

const (
	shapeOther     shape = iota // the apex, or any name not under svc.<zone>
	shapeSvc                    // svc.<zone>
	shapeNamespace              // <ns>.svc.<zone>
	shapeService                // <svc>.<ns>.svc.<zone>
	shapeOneLabel               // <a>.<svc>.<ns>.svc.<zone>: endpoint, or cluster id / _proto (clusterset)
	shapeTwoLabels              // <a>.<b>.<svc>.<ns>.svc.<zone>: _port._proto, or hostname.clusterid (clusterset)
	shapeTooLong                // deeper than any record
)

// qname is a query name split into the labels the Kubernetes DNS schemas use.
type qname struct {
	shape     shape
	base      string // the name without the zone and its dot; "" at the apex
	namespace string
	service   string
	first     string // leftmost label left of the service
	second    string // label between first and the service
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
	labels := [...]*string{&q.namespace, &q.service, &q.second, &q.first}
	q.shape = shapeSvc
	for _, dst := range labels {
		if rest == "" {
			return q.normalized()
		}
		rest, *dst = cutLast(rest)
		q.shape++
	}
	if rest != "" {
		q.shape = shapeTooLong
	}
	return q.normalized()
}

// normalized makes a single label left of the service "first", as its
// name says, rather than "second" where the right-to-left walk put it.
func (q qname) normalized() qname {
	if q.shape == shapeOneLabel {
		q.first, q.second = q.second, ""
	}
	return q
}

func cutLast(s string) (rest, label string) {
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+1:]
}

// portQuery reports whether the two labels left of a service name a port and
// protocol. In a native zone they always do, as in the kubernetes plugin; in
// the clusterset zone they name hostname.clusterid unless one starts with "_".
func (q qname) portQuery(clusterset bool) bool {
	return !clusterset || strings.HasPrefix(q.first, "_") || strings.HasPrefix(q.second, "_")
}

// portFilter is the port name and protocol of an SRV query name.
func (q qname) portFilter() (name, protocol string) {
	return strings.TrimPrefix(q.first, "_"), strings.TrimPrefix(q.second, "_")
}

func (p port) matches(name, protocol string) bool {
	return (name == "" || p.name == name) && (protocol == "" || p.protocol == protocol)
}
