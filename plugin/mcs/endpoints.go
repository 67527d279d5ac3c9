package mcs

import (
	"iter"
	"net"
	"net/netip"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

// A slice keeps its ready endpoints as compactly as answers allow, for a
// cluster holds hundreds of thousands: their addresses back to back, 4
// bytes each when all are IPv4 (an EndpointSlice holds one family), 16
// otherwise, and their hostnames only when one is not the address dashed,
// which hostname and named work out when asked. 300,000 IPv4 endpoints
// take 1.2 MB so, where a net.IP and a name each took 32 MB.

// endpoint is one ready endpoint as its slice lends it out.
type endpoint struct {
	ip   net.IP // 4 bytes for IPv4, so A records pack without conversion; the slice's memory
	host string // its hostname; "" when that is its address dashed
}

// count is the number of ready endpoints.
func (s *endpointSlice) count() int { return len(s.addrs) / s.width() }

func (s *endpointSlice) width() int {
	if s.wide {
		return net.IPv6len
	}
	return net.IPv4len
}

// endpoint is the i-th ready endpoint.
func (s *endpointSlice) endpoint(i int) endpoint {
	w := s.width()
	e := endpoint{ip: net.IP(s.addrs[i*w : (i+1)*w : (i+1)*w])}
	if v4 := e.ip.To4(); v4 != nil {
		e.ip = v4
	}
	if s.hosts != nil {
		e.host = (*s.hosts)[i]
	}
	return e
}

// all are the ready endpoints, in the slice's order.
func (s *endpointSlice) all() iter.Seq[endpoint] {
	return func(yield func(endpoint) bool) {
		for i := range s.count() {
			if !yield(s.endpoint(i)) {
				return
			}
		}
	}
}

// zonal are the endpoints of ss a zonal name asks for, as the kubernetes
// plugin chooses them: those in its topology zone; with prefer, every one
// when none is.
func zonal(ss []*endpointSlice, q *qname) []*endpointSlice {
	in := inZone(ss, q.topoZone)
	if len(in) == 0 && q.prefer {
		return ss
	}
	return in
}

// inZone are the endpoints of ss in topology zone z, in copies of their
// slices holding only those: zonal names are rare, and so every answer is
// built from them as from a whole set.
func inZone(ss []*endpointSlice, z string) []*endpointSlice {
	var out []*endpointSlice
	for _, s := range ss {
		if s.zones == nil {
			continue
		}
		c, w := *s, s.width()
		c.addrs, c.hosts, c.zones = nil, nil, nil
		var hosts, zones []string
		for i, zi := range *s.zones {
			if zi != z {
				continue
			}
			c.addrs = append(c.addrs, s.addrs[i*w:(i+1)*w]...)
			zones = append(zones, zi)
			if s.hosts != nil {
				hosts = append(hosts, (*s.hosts)[i])
			}
		}
		if len(zones) == 0 {
			continue
		}
		c.zones = &zones
		if s.hosts != nil {
			c.hosts = &hosts
		}
		out = append(out, &c)
	}
	return out
}

// hasHost reports whether an endpoint of s has hostname host.
func (s *endpointSlice) hasHost(host string) bool {
	for e := range s.all() {
		if e.named(host) {
			return true
		}
	}
	return false
}

// setEndpoints keeps the ready endpoints of eps whose addresses parse,
// and with keepZones their topology zones.
func (s *endpointSlice) setEndpoints(eps []discoveryv1.Endpoint, keepZones bool) {
	n, named, zoned := 0, false, false
	for a, e := range readyAddrs(eps) {
		n++
		s.wide = s.wide || a.Is6()
		named = named || keptName(a, hostnameOf(e)) != ""
		zoned = zoned || keepZones && e.Zone != nil && *e.Zone != ""
	}
	if n == 0 {
		return
	}
	s.addrs = make([]byte, 0, n*s.width())
	var hosts, zones []string
	if named {
		hosts = make([]string, 0, n)
	}
	if zoned {
		zones = make([]string, 0, n)
	}
	for a, e := range readyAddrs(eps) {
		if s.wide {
			b := a.As16()
			s.addrs = append(s.addrs, b[:]...)
		} else {
			b := a.As4()
			s.addrs = append(s.addrs, b[:]...)
		}
		if named {
			hosts = append(hosts, keptName(a, hostnameOf(e)))
		}
		if zoned {
			zones = append(zones, intern(ptr.Deref(e.Zone, "")))
		}
	}
	if named {
		s.hosts = &hosts
	}
	if zoned {
		s.zones = &zones
	}
}

func hostnameOf(e *discoveryv1.Endpoint) string { return ptr.Deref(e.Hostname, "") }

// readyAddrs are the addresses of the ready endpoints of eps that parse as
// net.ParseIP parses them (no zone), IPv4-mapped ones as IPv4, each with
// the address as spelt and its endpoint. An endpoint's first
// address is its address, as kube-proxy takes it: the API calls the
// others fungible with it, and a member that listed a hundred per
// endpoint would multiply every answer by a hundred.
func readyAddrs(eps []discoveryv1.Endpoint) iter.Seq2[spelt, *discoveryv1.Endpoint] {
	return func(yield func(spelt, *discoveryv1.Endpoint) bool) {
		for i := range eps {
			e := &eps[i]
			if e.Conditions.Ready != nil && !*e.Conditions.Ready { // unset counts as ready
				continue
			}
			if len(e.Addresses) == 0 {
				continue
			}
			text := e.Addresses[0]
			a, err := netip.ParseAddr(text)
			if err != nil || a.Zone() != "" {
				continue
			}
			if !yield(spelt{a.Unmap(), text}, e) {
				return
			}
		}
	}
}

// spelt is an address and its text as the slice spells it.
type spelt struct {
	netip.Addr
	text string
}

// keptName is what a slice keeps of an endpoint's name: its hostname, or
// its address dashed as spelt when that is not how it would be worked out
// (upper case, IPv4-mapped, zeros written out), as the kubernetes plugin
// names it; else "".
func keptName(a spelt, hostname string) string {
	if hostname != "" {
		return strings.ToLower(hostname)
	}
	var buf [64]byte
	if !strings.EqualFold(string(a.AppendTo(buf[:0])), a.text) {
		return dashed(a.text)
	}
	return ""
}

// hostname is the endpoint's name label: its hostname, else its address
// dashed.
func (e endpoint) hostname() string {
	if e.host != "" {
		return e.host
	}
	var buf [64]byte
	return string(e.appendDashed(buf[:0]))
}

// named reports whether e's hostname is host, without building it.
func (e endpoint) named(host string) bool {
	if e.host != "" {
		return e.host == host
	}
	var buf [64]byte
	return string(e.appendDashed(buf[:0])) == host
}

func (e endpoint) appendDashed(b []byte) []byte {
	a, _ := netip.AddrFromSlice(e.ip)
	return dashedName(a.AppendTo(b))
}

// addrKey is ip in 16 bytes, IPv4 mapped: one key for either length.
func addrKey(ip net.IP) [16]byte {
	a, _ := netip.AddrFromSlice(ip)
	return a.As16()
}

// dashed is the hostname of an endpoint without one, as the kubernetes
// plugin names it: 10.0.0.1 → 10-0-0-1, fd00::1 → fd00--1, fd00:: → fd00--0.
func dashed(addr string) string {
	return string(dashedName([]byte(addr)))
}

// dashedName dashes the address text b in place.
func dashedName(b []byte) []byte {
	for i, c := range b {
		switch {
		case c == '.' || c == ':':
			b[i] = '-'
		case 'A' <= c && c <= 'Z':
			b[i] = c + 'a' - 'A'
		}
	}
	if len(b) > 0 && b[len(b)-1] == '-' {
		b = append(b, '0')
	}
	return b
}
