package mcs

import (
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/miekg/dns"
)

// dnsVersion is the MCS DNS schema version (KEP-1645 specification §2.2).
const dnsVersion = "1.0.0"

// serveClusterset answers the clusterset zone per the KEP-1645 DNS
// specification; mcs is authoritative there.
func (m *MCS) serveClusterset(q *query) (dns.ResponseWriter, int, error) {
	if t := q.state.QType(); t == dns.TypeAXFR || t == dns.TypeIXFR {
		return answered(dns.RcodeRefused, nil) // no zone transfers, as the kubernetes plugin; the server writes REFUSED
	}
	switch q.name.shape {
	case shapeOther:
		return m.clustersetMeta(q)
	case shapeSvc:
		return m.answer(q, nodata)
	case shapeTooLong:
		return m.nxdomain(q)
	}
	if !m.watcher.ready.Load() {
		if !q.name.possible() { // no object has such a name: NXDOMAIN, as once synced
			return m.nxdomain(q)
		}
		return m.servfail(q)
	}
	if q.name.shape == shapeNamespace {
		if m.idx.hasNamespace(q.name.namespace) {
			return m.answer(q, nodata)
		}
		return m.nxdomain(q)
	}
	v := m.idx.view(q.name.namespace, q.name.service)
	if v == nil || v.imp == nil {
		return m.nxdomain(q)
	}
	resp, ok := m.clustersetService(q, v)
	if !ok {
		return m.nxdomain(q)
	}
	return m.answer(q, resp)
}

// clustersetMeta answers the names that are not services: the apex (SOA,
// NS), the schema version, and the name server the NS record points to.
func (m *MCS) clustersetMeta(q *query) (dns.ResponseWriter, int, error) {
	qtype, owner, ttl := q.state.QType(), q.owner, m.cfg.ttl
	switch {
	case q.name.base == "" && qtype == dns.TypeSOA:
		return m.answer(q, response{answer: []dns.RR{soa(q.origZone, ttl, m.idx.serial.Load())}})
	case q.name.base == "" && qtype == dns.TypeNS:
		ns := nsRR(owner, ttl)
		return m.answer(q, response{answer: []dns.RR{ns}, extra: m.nsRecords(ns.(*dns.NS).Ns)})
	case q.name.base == "dns-version" && qtype == dns.TypeTXT:
		return m.answer(q, response{answer: []dns.RR{txtRR(owner, ttl, dnsVersion)}})
	case q.name.base == "ns.dns" && (qtype == dns.TypeA || qtype == dns.TypeAAAA):
		return m.answer(q, response{answer: vipRecords(owner, qtype, m.idx.nsGlue(m.nsAddrs), ttl)})
	case q.name.base == "" || q.name.base == "dns-version" || q.name.base == "ns.dns" || q.name.base == "dns":
		return m.answer(q, nodata)
	}
	return m.nxdomain(q)
}

func (m *MCS) nsRecords(name string) []dns.RR {
	glue := m.idx.nsGlue(m.nsAddrs)
	rrs := vipRecords(name, dns.TypeA, glue, m.cfg.ttl)
	return append(rrs, vipRecords(name, dns.TypeAAAA, glue, m.cfg.ttl)...)
}

// clustersetService answers the names under an imported service. ok is false
// for names that do not exist (NXDOMAIN).
func (m *MCS) clustersetService(q *query, v *view) (response, bool) {
	eps := firstNonEmpty(v.splitImported(m.idx, time.Now()))
	if v.headless() && len(eps) == 0 {
		return response{}, false // a headless import without ready endpoints does not exist
	}
	// <clusterid> and _<proto> have no records but names below them: such a
	// name exists (RFC 8020), so it is NODATA, never NXDOMAIN, or resolvers
	// would deny the names below.
	switch q.name.shape {
	case shapeService:
		return m.clustersetRecords(q, v, eps, "", "", false), true
	case shapeCluster:
		return nodata, v.hasEndpointsIn(q.name.cluster)
	case shapeProto:
		return nodata, v.hasProtocol(q.name.proto)
	case shapePort:
		resp := m.clustersetRecords(q, v, eps, q.name.port, q.name.proto, true)
		return resp, resp.rcode == dns.RcodeSuccess
	}
	return m.clustersetEndpoint(q, v)
}

// clustersetRecords answers the service name itself (all ports for SRV) or,
// with byPort, an _port._proto name; a port name that matches nothing is
// reported with rcode NXDOMAIN.
func (m *MCS) clustersetRecords(q *query, v *view, eps []*endpointSlice, name, protocol string, byPort bool) response {
	qtype := q.state.QType()
	if byPort || qtype != dns.TypeA && qtype != dns.TypeAAAA {
		return m.clustersetSRV(q, v, eps, name, protocol, byPort)
	}
	if v.headless() {
		return response{answer: addressesOf(q, eps, "", m.cfg.ttl)}
	}
	return response{answer: vipRecords(q.owner, qtype, v.imp.ips, m.cfg.ttl)}
}

// clustersetSRV is clustersetRecords for every type but A and AAAA, in a
// frame of its own: an SRV set's is not under the address answers
// (TestAnswerPathDepth).
//
//go:noinline
func (m *MCS) clustersetSRV(q *query, v *view, eps []*endpointSlice, name, protocol string, byPort bool) response {
	qtype, owner, ttl := q.state.QType(), q.owner, m.cfg.ttl
	svcName := dnsutil.Join(v.imp.name(), v.imp.namespace(), "svc", q.zone)
	set := newSRVSet(q, ttl)
	if v.headless() {
		set.endpointSRV(owner, eps, "", name, protocol, func(s *endpointSlice, e endpoint) string {
			return e.hostname() + "." + s.cluster + "." + svcName
		}, nil)
	} else {
		set.vipSRV(owner, svcName, v.imp.ports, v.imp.ips, name, protocol)
	}
	if byPort && len(set.answer) == 0 {
		return response{rcode: dns.RcodeNameError}
	}
	if qtype != dns.TypeSRV {
		return nodata
	}
	answer, extra := set.records()
	return response{answer: answer, extra: extra}
}

// clustersetEndpoint answers <hostname>.<clusterid>.<svc>.<ns>.svc.<zone>,
// which exists for the ready endpoints of headless imports, stale or not:
// the name picks one cluster explicitly.
func (m *MCS) clustersetEndpoint(q *query, v *view) (response, bool) {
	if !v.headless() {
		return response{}, false
	}
	host, cluster := q.name.host, q.name.cluster
	var ss []*endpointSlice
	for _, s := range v.imported() {
		if s.cluster == cluster && s.hasHost(host) {
			ss = append(ss, s)
		}
	}
	if len(ss) == 0 {
		return response{}, false
	}
	qtype := q.state.QType()
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		return nodata, true
	}
	return response{answer: endpointRecords(q.owner, qtype, ss, host, m.cfg.ttl, &budget{state: q.state})}, true
}

// nxdomain denies a clusterset name, or passes it on under fallthrough.
func (m *MCS) nxdomain(q *query) (dns.ResponseWriter, int, error) {
	if m.cfg.fall.Through(q.lower) {
		return q.state.W, 0, nil
	}
	count(q.ctx, q.zone, "", outcomeNXDomain)
	return m.write(q, response{rcode: dns.RcodeNameError})
}

// answer writes a clusterset answer and counts it: every clusterset answer
// covers the whole clusterset.
func (m *MCS) answer(q *query, resp response) (dns.ResponseWriter, int, error) {
	count(q.ctx, q.zone, "", outcomeCombined)
	return m.write(q, resp)
}
