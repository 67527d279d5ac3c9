package mcs

import (
	"context"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	ot "github.com/opentracing/opentracing-go"
)

// query is one question being answered.
type query struct {
	ctx      context.Context // the request's: it names the server for metrics
	state    request.Request
	owner    string // the name as the client spelled it: answers keep its case
	lower    string // owner in lower case
	zone     string // the matched zone, lower-case
	origZone string // the zone as the client spelled it, for the SOA
	name     qname
	out      *dns.Msg // the answer mcs wrote, for ServeDNS to send
}

// ServeDNS implements plugin.Handler. serve answers what mcs answers; the
// answer is sent, or the next plugin called, here, once serve has returned.
// Each query runs on a goroutine of its own whose stack starts small and
// grows by copying, and both packing an answer and the next plugin's path
// come close to a doubling of it: so serve's frames (the request, the
// parsed name, the records) do not stay under them. Almost every query is
// an ordinary name that goes on; the stack is grown before the next plugin
// is called (see reserveStack), and plugin.NextOrFailure's frame (a tracing
// span, and a writer that tells a metrics recorder which plugin answered)
// is left out unless it has one of these to do.
func (m *MCS) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	pass, out, rcode, err := m.serve(ctx, w, r)
	if out != nil {
		return rcode, w.WriteMsg(out)
	}
	if pass == nil {
		return rcode, err
	}
	reserveStack()
	if _, tracked := pass.(plugin.PluginTracker); tracked || m.Next == nil || ot.SpanFromContext(ctx) != nil {
		return plugin.NextOrFailure(pluginName, m.Next, ctx, pass, r)
	}
	return m.Next.ServeDNS(ctx, pass, r)
}

// stackReserve is the frame of reserveStack: big enough that, called a few
// frames into a query's goroutine, it grows the stack to 16 KB in one copy.
const stackReserve = 7 << 10

// reserveStack grows the query's stack before the next plugin runs. The
// kubernetes plugin answers a service name about 7.1 KB deep (the server's
// frames included), within 200 bytes of the 8 KB its stack grows to; the
// 104 bytes of mcs's frame under it push it over, and every ordinary name
// would pay a second growth at the deepest point, where the runtime copies
// 8 KB and adjusts some 20 frames (a fifth of the CPU of a server answering
// such names, plugin/mcs/README.md "Plugin order"). Here, a few frames
// deep, the one growth the query needs anyway is cheap, and the 16 KB it
// leaves hold the next plugin's path with room to spare
// (TestStackReservedForNext). It costs clearing 7 KB, about 0.1 µs.
//
//go:noinline
func reserveStack() {
	var pad [stackReserve]byte
	keepOnStack(&pad)
}

// keepOnStack makes the compiler keep reserveStack's frame.
//
//go:noinline
func keepOnStack(*[stackReserve]byte) {}

// serve answers r: it returns the answer to send, or the writer through
// which the next plugin must answer, or else the rcode for the server.
func (m *MCS) serve(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (pass dns.ResponseWriter, out *dns.Msg, rcode int, err error) {
	var q query
	derivedOnly, ok := m.parse(ctx, w, r, &q)
	switch {
	case !ok:
		return w, nil, 0, nil
	case derivedOnly:
		pass, rcode, err = m.serveDerivedOnly(&q)
	case q.zone == clustersetZone:
		pass, rcode, err = m.serveClusterset(&q)
	case isReverse(q.zone):
		pass, rcode, err = m.serveReverse(&q)
	default:
		pass, rcode, err = m.serveNative(&q)
	}
	return pass, q.out, rcode, err
}

// parse fills q with r's question when it is in a zone of mcs's, or of
// the kubernetes plugin's (derivedOnly). Its temporaries (the request,
// the printed and lowered names) stay in its own frame, which is gone
// before the answer is built: the deepest point of answering, where the
// records are allocated, is that much nearer the top of a query's stack
// (TestAnswerPathDepth).
//
//go:noinline
func (m *MCS) parse(ctx context.Context, w dns.ResponseWriter, r *dns.Msg, q *query) (derivedOnly, ok bool) {
	if len(r.Question) == 0 {
		return false, false
	}
	state := request.Request{W: w, Req: r}
	if state.QClass() != dns.ClassINET {
		return false, false
	}
	// request.Request's Name and QName each print the name afresh (a scan
	// for escapes); lowering the printed one gives the same as Name.
	owner := state.QName()
	name := strings.ToLower(owner)
	zone := m.matchZone(name)
	if zone == "" {
		// A forward zone of the kubernetes plugin that is not mcs's: only
		// its derived names may be mcs's to answer (derived.go).
		if zone, derivedOnly = matchZone(m.kube.zones, name), true; zone == "" {
			return false, false
		}
	}
	q.ctx, q.state, q.owner, q.lower, q.zone, q.origZone = ctx, state, owner, name, zone, zone
	q.name = parseName(name, zone)
	if len(q.owner) == len(name) {
		q.origZone = q.owner[len(name)-len(zone):]
	}
	return derivedOnly, true
}

// answered is the result of a query mcs wrote the answer to.
func answered(rcode int, err error) (dns.ResponseWriter, int, error) { return nil, rcode, err }

// matchZone is plugin.Zones.Matches without its allocations: on lower-case
// names without escapes a label boundary is a plain dot, so a suffix test
// suffices (zones are never the root).
func (m *MCS) matchZone(name string) string { return matchZone(m.cfg.zones, name) }

// matchZone is the longest of zones that name is in, or "".
func matchZone(zones []string, name string) string {
	if strings.IndexByte(name, '\\') >= 0 {
		return plugin.Zones(zones).Matches(name)
	}
	zone := ""
	for _, z := range zones {
		if len(z) > len(zone) && (name == z || strings.HasSuffix(name, z) && name[len(name)-len(z)-1] == '.') {
			zone = z
		}
	}
	return zone
}

// response is an answer under construction.
type response struct {
	rcode         int
	answer, extra []dns.RR
}

var nodata = response{rcode: dns.RcodeSuccess}

// write answers resp with the aa flag; an empty answer (NODATA, NXDOMAIN)
// carries the zone's SOA in the authority section so it can be cached
// negatively for the configured TTL.
func (m *MCS) write(q *query, resp response) (dns.ResponseWriter, int, error) {
	return m.writeTTL(q, resp, m.cfg.ttl)
}

// writeTTL is write with the SOA's TTL ttl.
func (m *MCS) writeTTL(q *query, resp response, ttl uint32) (dns.ResponseWriter, int, error) {
	msg := new(dns.Msg)
	msg.SetRcode(q.state.Req, resp.rcode)
	msg.Authoritative = true
	msg.Answer, msg.Extra = resp.answer, resp.extra
	if len(resp.answer) == 0 {
		msg.Ns = []dns.RR{soa(q.origZone, ttl, m.idx.serial.Load())}
	}
	q.out = msg
	return answered(dns.RcodeSuccess, nil)
}

// servfail answers a name that cannot be known before the informers have
// synced: SERVFAIL is retried, where an NXDOMAIN would be cached.
func (m *MCS) servfail(q *query) (dns.ResponseWriter, int, error) {
	count(q.ctx, q.zone, "", outcomeServfail)
	q.out = servfailTo(q.state.Req)
	return answered(dns.RcodeSuccess, nil)
}

func servfailTo(r *dns.Msg) *dns.Msg {
	msg := new(dns.Msg)
	msg.SetRcode(r, dns.RcodeServerFailure)
	return msg
}

// unsyncedWriter carries the next plugin's answer to a native name before
// mcs has synced. The name may be an import mcs does not know of yet, so an
// NXDOMAIN, which resolvers would cache, becomes a SERVFAIL, which they
// retry; every other answer is the next plugin's, untouched.
type unsyncedWriter struct {
	dns.ResponseWriter
	ctx  context.Context
	zone string
	req  *dns.Msg
}

// WriteMsg implements dns.ResponseWriter.
func (w *unsyncedWriter) WriteMsg(res *dns.Msg) error {
	if res.Rcode != dns.RcodeNameError {
		return w.ResponseWriter.WriteMsg(res)
	}
	count(w.ctx, w.zone, "", outcomeServfail)
	return w.ResponseWriter.WriteMsg(servfailTo(w.req))
}
