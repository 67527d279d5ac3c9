package mcs

import (
	"net"
	"slices"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// family is the address query type an IP answers: A or AAAA.
func family(ip net.IP) uint16 {
	if len(ip) == net.IPv4len {
		return dns.TypeA
	}
	return dns.TypeAAAA
}

func addrRR(name string, ip net.IP, ttl uint32) dns.RR {
	hdr := dns.RR_Header{Name: name, Rrtype: family(ip), Class: dns.ClassINET, Ttl: ttl}
	if hdr.Rrtype == dns.TypeA {
		return &dns.A{Hdr: hdr, A: ip}
	}
	return &dns.AAAA{Hdr: hdr, AAAA: ip}
}

// vipRecords answers an A or AAAA query with the virtual IPs of that family.
func vipRecords(name string, qtype uint16, ips []net.IP, ttl uint32) []dns.RR {
	var rrs []dns.RR
	for _, ip := range ips {
		if family(ip) == qtype {
			rrs = append(rrs, addrRR(name, ip, ttl))
		}
	}
	return rrs
}

// minRR is the fewest bytes a record takes in a message: an A record whose
// name is compressed to a pointer. An answer of more records than the
// client's message size over minRR cannot fit: the server truncates it
// (and sets TC), so no more are built, however many endpoints a member
// exported.
const minRR = 16

// budget bounds the records of an answer to a request. The client's
// message size is read only once an answer has as many records as the
// smallest message holds (512 bytes, over UDP without EDNS): reading it
// costs allocations that almost every answer need not pay. It holds a
// copy of the request, so that the query stays on the stack.
type budget struct {
	state request.Request
	n     int // 0 until read
}

const minBudget = 512 / minRR

// allows reports whether an answer of count records may have another.
func (b *budget) allows(count int) bool {
	if count < minBudget {
		return true
	}
	if b.n == 0 {
		b.n = b.state.Size() / minRR
	}
	return count < b.n
}

// endpointRecords answers an A or AAAA query with the endpoint addresses of
// that family (only those named host, if set), each address once: an
// endpoint may briefly sit in two slices while they are rebalanced. It
// stops where b does.
func endpointRecords(name string, qtype uint16, ss []*endpointSlice, host string, ttl uint32, b *budget) []dns.RR {
	var rrs []dns.RR
	var seen map[[16]byte]struct{}
	if len(ss) > 1 {
		seen = map[[16]byte]struct{}{}
	}
	for _, s := range ss {
		for e := range s.all() {
			if !b.allows(len(rrs)) {
				break // a return here made every answer grow rrs on the heap (BenchmarkServeDNS)
			}
			if family(e.ip) != qtype || (host != "" && !e.named(host)) {
				continue
			}
			if seen != nil {
				k := addrKey(e.ip)
				if _, dup := seen[k]; dup {
					continue
				}
				seen[k] = struct{}{}
			}
			rrs = append(rrs, addrRR(name, e.ip, ttl))
		}
	}
	return rrs
}

// srvSet collects SRV records and their address glue, each once, as many
// in all as its budget allows; one at most when only is set.
type srvSet struct {
	ttl    uint32
	budget budget
	only   bool
	answer []dns.RR
	extra  []dns.RR
	seen   map[srvKey]struct{}
}

type srvKey struct {
	target string
	port   int32
	ip     string
}

// newSRVSet is the SRV set of an answer to q. A query of another type
// only asks whether the name has a record: one is built at most.
func newSRVSet(q *query, ttl uint32) *srvSet {
	return &srvSet{ttl: ttl, budget: budget{state: q.state}, only: q.state.QType() != dns.TypeSRV, seen: map[srvKey]struct{}{}}
}

// full reports whether the set holds as many records as it may.
func (s *srvSet) full() bool {
	n := len(s.answer) + len(s.extra)
	return s.only && n > 0 || !s.budget.allows(n)
}

func (s *srvSet) add(owner, target string, p port, ips ...net.IP) {
	if s.full() {
		return
	}
	if k := (srvKey{target: target, port: p.port}); !s.dup(k) {
		s.answer = append(s.answer, &dns.SRV{
			Hdr:    dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: s.ttl},
			Port:   uint16(p.port), // #nosec G115 -- API validation keeps ports in 1..65535
			Target: target,
		})
	}
	for _, ip := range ips {
		if s.full() {
			return
		}
		if k := (srvKey{target: target, ip: string(ip)}); !s.dup(k) {
			s.extra = append(s.extra, addrRR(target, ip, s.ttl))
		}
	}
}

func (s *srvSet) dup(k srvKey) bool {
	if _, ok := s.seen[k]; ok {
		return true
	}
	s.seen[k] = struct{}{}
	return false
}

// records returns the SRV answer with weights spread evenly, as the
// kubernetes plugin does: 100 split over the records, at least 1 each.
func (s *srvSet) records() (answer, extra []dns.RR) {
	w := uint16(max(1, 100/max(1, len(s.answer))))
	for _, rr := range s.answer {
		rr.(*dns.SRV).Weight = w
	}
	return s.answer, s.extra
}

// vipSRV adds one SRV per port matching name/protocol, targeting target.
func (s *srvSet) vipSRV(owner, target string, ports portList, ips []net.IP, name, protocol string) {
	for p := range ports.all() {
		if p.matches(name, protocol) && p.port > 0 {
			s.add(owner, target, p, ips...)
		}
	}
}

// endpointSRV adds one SRV per endpoint and matching slice port; targetOf
// names each endpoint's target, and an endpoint whose target shadowed
// holds is left out.
func (s *srvSet) endpointSRV(owner string, ss []*endpointSlice, host, name, protocol string, targetOf func(*endpointSlice, endpoint) string, shadowed map[string]bool) {
	for _, sl := range ss {
		for e := range sl.all() {
			if s.full() {
				return
			}
			if host != "" && !e.named(host) || shadowed != nil && sl.imported && shadowed[e.hostname()] {
				continue
			}
			for p := range sl.ports.all() {
				if p.matches(name, protocol) && p.port > 0 {
					s.add(owner, targetOf(sl, e), p, e.ip)
				}
			}
		}
	}
}

// soa is the zone's SOA, shaped as the kubernetes plugin shapes its own.
func soa(zone string, ttl, serial uint32) dns.RR {
	return &dns.SOA{
		Hdr:     dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: min(ttl, 300)},
		Ns:      dnsutil.Join("ns.dns", zone),
		Mbox:    dnsutil.Join("hostmaster", zone),
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  ttl,
	}
}

func nsRR(zone string, ttl uint32) dns.RR {
	return &dns.NS{Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: ttl}, Ns: dnsutil.Join("ns.dns", zone)}
}

func txtRR(name string, ttl uint32, text string) dns.RR {
	return &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttl}, Txt: []string{text}}
}

// localNames are the hostnames of the local endpoints of ss, when ss holds
// imported ones too: a local pod's name is its own (native.go), so no
// imported endpoint of that name is a target or glue under it.
func localNames(ss []*endpointSlice) map[string]bool {
	if !slices.ContainsFunc(ss, func(s *endpointSlice) bool { return s.imported }) {
		return nil
	}
	names := map[string]bool{}
	for _, s := range ss {
		if !s.imported {
			for e := range s.all() {
				names[e.hostname()] = true
			}
		}
	}
	return names
}
