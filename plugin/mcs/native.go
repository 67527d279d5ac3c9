package mcs

import (
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/miekg/dns"
)

// serveNative answers the cluster.local names of multi-cluster-enabled
// services. Every other name goes to the next plugin untouched, so the
// kubernetes plugin's answer is what it would be without mcs. Before mcs
// has synced every name goes on, and only the NXDOMAIN of a name that may
// be an import's is changed: a broken mcs must not break ordinary names.
func (m *MCS) serveNative(q *query) (dns.ResponseWriter, int, error) {
	w := q.state.W
	if !m.ofService(q) {
		return w, 0, nil
	}
	if !m.watcher.ready.Load() {
		return m.unsynced(q), 0, nil
	}
	v := m.idx.view(q.name.namespace, q.name.service)
	if !v.native() {
		if d := m.derivedView(q); d != nil {
			return m.serveDerived(q, d)
		}
		return w, 0, nil
	}
	host := ""
	if q.name.shape == shapeEndpoint {
		host = q.name.host
	}
	split := func() candidates { return v.split(m.idx, host, time.Now()) }
	c, ok := choose(v, m.cfg.answer, host != "", split)
	if !ok {
		return w, 0, nil
	}
	if q.name.shape == shapeProto && !c.hasProtocol(q.name.proto) {
		return w, 0, nil
	}
	if q.name.shape == shapeZonal {
		if !v.headless() { // the kubernetes plugin's NXDOMAIN: a VIP has no zone
			return w, 0, nil
		}
		c.slices = zonal(c.slices, &q.name)
	}
	resp, ok := m.nativeAnswer(q, v, c, host)
	if !ok {
		return w, 0, nil
	}
	count(q.ctx, q.zone, v.strategy, c.outcome)
	if c.fellBack {
		localFallbacks.Inc()
	}
	return m.write(q, resp)
}

// ofService reports whether q is a service's name or one below it, its
// zonal names only where the kubernetes plugin has them (its zonal
// option): elsewhere they are its NXDOMAIN, as too long a name.
func (m *MCS) ofService(q *query) bool {
	return q.name.ofService() && (q.name.shape != shapeZonal || m.kube.zonal)
}

// unsynced is the writer the next plugin answers q through before mcs has
// synced. Its NXDOMAIN becomes a SERVFAIL, which resolvers retry, only for
// a name that may be an import's: one that can name an object at all, of
// a service whose derived-<svc> Service the kubernetes plugin holds (the
// controller writes one for every import; without a kubernetes plugin, any
// service), a headless one for a zonal name. Every other name keeps the next plugin's answer: musl stops a
// search path at a SERVFAIL, and the expansions of external names
// (example.com.<ns>.svc.<zone>, www.example.com.svc.<zone>) are shaped
// like service names.
func (m *MCS) unsynced(q *query) dns.ResponseWriter {
	w := q.state.W
	if !q.name.possible() || !m.kube.mayImport(q.name.namespace, q.name.service, q.name.shape == shapeZonal) {
		return w
	}
	return &unsyncedWriter{ResponseWriter: w, ctx: q.ctx, zone: q.zone, req: q.state.Req}
}

// nativeAnswer builds the records of choice c for the query type. ok is false
// when an SRV name asks for a port the chosen set does not have.
func (m *MCS) nativeAnswer(q *query, v *view, c choice, host string) (response, bool) {
	qtype, owner, ttl := q.state.QType(), q.owner, m.cfg.ttl
	switch q.name.shape {
	case shapePort:
		return m.nativeSRV(q, v, c, host, true)
	case shapeProto:
		// No records, but the SRV names below it: it exists (RFC 8020),
		// so NODATA, or resolvers would deny the names below.
		return nodata, true
	}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		if c.vips != nil {
			return response{answer: vipRecords(owner, qtype, c.vips, ttl)}, true
		}
		return response{answer: addressesOf(q, c.slices, host, ttl)}, true
	case dns.TypeSRV:
		return m.nativeSRV(q, v, c, host, false)
	}
	return nodata, true
}

// addressesOf is endpointRecords for q, with its budget: in a frame of
// its own, so that the copy of the request a budget holds is not under
// every other answer's records (TestAnswerPathDepth).
//
//go:noinline
func addressesOf(q *query, ss []*endpointSlice, host string, ttl uint32) []dns.RR {
	return endpointRecords(q.owner, q.state.QType(), ss, host, ttl, &budget{state: q.state})
}

// nativeSRV answers SRV: virtual IPs target the service name, endpoints
// their own names under it, as the kubernetes plugin names them.
func (m *MCS) nativeSRV(q *query, v *view, c choice, host string, byPort bool) (response, bool) {
	name, protocol := "", ""
	if byPort {
		name, protocol = q.name.port, q.name.proto
	}
	svcName := dnsutil.Join(v.imp.name(), v.imp.namespace(), "svc", q.zone)
	set := newSRVSet(q, m.cfg.ttl)
	owner := q.owner
	if c.vips != nil {
		set.vipSRV(owner, svcName, c.ports, c.vips, name, protocol)
	} else {
		set.endpointSRV(owner, c.slices, host, name, protocol, func(_ *endpointSlice, e endpoint) string {
			return e.hostname() + "." + svcName
		}, localNames(c.slices))
	}
	if byPort && len(set.answer) == 0 {
		return response{}, false
	}
	if q.state.QType() != dns.TypeSRV {
		return nodata, true
	}
	answer, extra := set.records()
	return response{answer: answer, extra: extra}, true
}
