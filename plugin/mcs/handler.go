package mcs

import (
	"context"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
)

// query is one question being answered.
type query struct {
	state    request.Request
	owner    string // the name as the client spelled it: answers keep its case
	zone     string // the matched zone, lower-case
	origZone string // the zone as the client spelled it, for the SOA
	name     qname
}

// ServeDNS implements plugin.Handler.
func (m *MCS) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) == 0 {
		return m.next(ctx, w, r)
	}
	state := request.Request{W: w, Req: r}
	if state.QClass() != dns.ClassINET {
		return m.next(ctx, w, r)
	}
	name := state.Name()
	zone := m.matchZone(name)
	if zone == "" {
		return m.next(ctx, w, r)
	}
	q := &query{state: state, owner: state.QName(), zone: zone, origZone: zone, name: parseName(name, zone)}
	if len(q.owner) == len(name) {
		q.origZone = q.owner[len(name)-len(zone):]
	}
	if zone == clustersetZone {
		return m.serveClusterset(ctx, q)
	}
	return m.serveNative(ctx, q)
}

// matchZone is plugin.Zones.Matches without its allocations: on lower-case
// names without escapes a label boundary is a plain dot, so a suffix test
// suffices (zones are never the root).
func (m *MCS) matchZone(name string) string {
	if strings.IndexByte(name, '\\') >= 0 {
		return plugin.Zones(m.cfg.zones).Matches(name)
	}
	zone := ""
	for _, z := range m.cfg.zones {
		if len(z) > len(zone) && (name == z || strings.HasSuffix(name, z) && name[len(name)-len(z)-1] == '.') {
			zone = z
		}
	}
	return zone
}

func (m *MCS) next(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
}

// response is an answer under construction.
type response struct {
	rcode         int
	answer, extra []dns.RR
}

var nodata = response{rcode: dns.RcodeSuccess}

// write sends resp with the aa flag; an empty answer (NODATA, NXDOMAIN)
// carries the zone's SOA in the authority section so it can be cached
// negatively for the configured TTL.
func (m *MCS) write(q *query, resp response) (int, error) {
	msg := new(dns.Msg)
	msg.SetRcode(q.state.Req, resp.rcode)
	msg.Authoritative = true
	msg.Answer, msg.Extra = resp.answer, resp.extra
	if len(resp.answer) == 0 {
		msg.Ns = []dns.RR{soa(q.origZone, m.cfg.ttl, m.idx.serial.Load())}
	}
	return dns.RcodeSuccess, q.state.W.WriteMsg(msg)
}

// servfail answers a name that cannot be known before the informers have
// synced: SERVFAIL is retried, where an NXDOMAIN would be cached.
func (m *MCS) servfail(q *query) (int, error) {
	count(q.zone, "", outcomeServfail)
	msg := new(dns.Msg)
	msg.SetRcode(q.state.Req, dns.RcodeServerFailure)
	return dns.RcodeSuccess, q.state.W.WriteMsg(msg)
}
