//go:build lab

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// answerTimeout bounds the wait for an answer to follow the API: one
// informer event, plus the API server's own latency on a busy lab.
const answerTimeout = 10 * time.Second

// server is one server block of a running coredns.
type server struct {
	addr string
	ttl  uint32 // the TTL mcs answers with
}

// ask sends one query with EDNS0 over network (udp or tcp). It has a
// timeout of its own and ignores ctx's end, so that the last try of a poll
// reports what it got rather than that the poll's time was up.
func (s *server) ask(ctx context.Context, name string, qtype uint16, network string) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: 2 * time.Second}
	r, _, err := c.ExchangeContext(context.WithoutCancel(ctx), question(name, qtype), s.addr)
	return r, err
}

func question(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(1232, false)
	return m
}

// askRaw sends one query over UDP and returns the response as it came off
// the wire, with its message ID zeroed. Like ask, it ignores ctx's end.
func (s *server) askRaw(ctx context.Context, name string, qtype uint16) ([]byte, error) {
	query, err := question(name, qtype).Pack()
	if err != nil {
		return nil, err
	}
	conn, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(context.WithoutCancel(ctx), "udp", s.addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write(query); err != nil {
		return nil, err
	}
	buf := make([]byte, 65535)
	n, err := conn.Read(buf)
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, fmt.Errorf("a %d-byte response", n)
	}
	buf[0], buf[1] = 0, 0
	return buf[:n], nil
}

// expect waits until s answers name/qtype over UDP with want.
func (s *server) expect(t *testing.T, name string, qtype uint16, want reply) {
	t.Helper()
	s.expectOver(t, "udp", name, qtype, want)
}

// expectWithin is expect with another timeout.
func (s *server) expectWithin(t *testing.T, timeout time.Duration, name string, qtype uint16, want reply) {
	t.Helper()
	s.poll(t, timeout, "udp", name, qtype, want)
}

// expectOver is expect over network (udp or tcp).
func (s *server) expectOver(t *testing.T, network, name string, qtype uint16, want reply) {
	t.Helper()
	s.poll(t, answerTimeout, network, name, qtype, want)
}

func (s *server) poll(t *testing.T, timeout time.Duration, network, name string, qtype uint16, want reply) {
	t.Helper()
	labtest.Eventually(t, timeout, func(ctx context.Context) error {
		m, err := s.ask(ctx, name, qtype, network)
		if err != nil {
			return err
		}
		if got := summarize(m); got.String() != want.String() {
			return fmt.Errorf("%s %s from %s over %s:\ngot:\n%s\nwant:\n%s", name, dns.TypeToString[qtype], s.addr, network, got, want)
		}
		return nil
	})
}

// expectSame waits until s answers name/qtype byte for byte as ref does
// (message ID aside), once ref's answer has rcode and n answer records: a
// comparison of two answers that do not know the objects yet proves nothing.
func expectSame(t *testing.T, s, ref *server, name string, qtype uint16, rcode, n int) {
	t.Helper()
	expectMatching(t, s, ref, name, qtype, rcode, n, bytes.Equal)
}

// expectAlike is expectSame for answers built by two plugins: alike record
// for record, the order within a section and the SOA serial aside.
func expectAlike(t *testing.T, s, ref *server, name string, qtype uint16, rcode, n int) {
	t.Helper()
	expectMatching(t, s, ref, name, qtype, rcode, n, func(got, want []byte) bool {
		return unpacked(got).sorted().String() == unpacked(want).sorted().String()
	})
}

func expectMatching(t *testing.T, s, ref *server, name string, qtype uint16, rcode, n int, same func(got, want []byte) bool) {
	t.Helper()
	labtest.Eventually(t, answerTimeout, func(ctx context.Context) error {
		want, err := ref.askRaw(ctx, name, qtype)
		if err != nil {
			return err
		}
		var m dns.Msg
		if err := m.Unpack(want); err != nil {
			return err
		}
		if m.Rcode != rcode || len(m.Answer) != n {
			return fmt.Errorf("%s %s from %s: want %s with %d answers first, got:\n%s", name, dns.TypeToString[qtype], ref.addr, dns.RcodeToString[rcode], n, summarize(&m))
		}
		got, err := s.askRaw(ctx, name, qtype)
		if err != nil {
			return err
		}
		if !same(got, want) {
			return fmt.Errorf("%s %s: %s answered\n%s\n%x\n%s answered\n%s\n%x", name, dns.TypeToString[qtype], s.addr, unpacked(got), got, ref.addr, unpacked(want), want)
		}
		return nil
	})
}

func unpacked(b []byte) reply {
	var m dns.Msg
	if err := m.Unpack(b); err != nil {
		return reply{header: err.Error()}
	}
	return summarize(&m)
}

// reply is what a test checks of a response: rcode and the aa flag, and
// each section's records, normalised and sorted (the SOA serial zeroed, the
// OPT record left out).
type reply struct {
	header            string // "NOERROR aa", "SERVFAIL"
	answer, ns, extra []string
}

func (r reply) String() string {
	var b strings.Builder
	b.WriteString(r.header)
	for _, sec := range []struct {
		name string
		rrs  []string
	}{{"answer", r.answer}, {"authority", r.ns}, {"additional", r.extra}} {
		rrs := slices.Sorted(slices.Values(sec.rrs))
		for _, rr := range rrs {
			fmt.Fprintf(&b, "\n  %s: %s", sec.name, rr)
		}
	}
	return b.String()
}

// sorted is r with each section in order.
func (r reply) sorted() reply {
	r.answer, r.ns, r.extra = slices.Sorted(slices.Values(r.answer)), slices.Sorted(slices.Values(r.ns)), slices.Sorted(slices.Values(r.extra))
	return r
}

func summarize(m *dns.Msg) reply {
	r := reply{header: dns.RcodeToString[m.Rcode]}
	if m.Authoritative {
		r.header += " aa"
	}
	r.answer, r.ns = normalizeAll(m.Answer), normalizeAll(m.Ns)
	r.extra = normalizeAll(slices.DeleteFunc(slices.Clone(m.Extra), func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeOPT }))
	return r
}

func normalizeAll(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, normalize(rr))
	}
	return out
}

// normalize writes rr in zone-file syntax with single spaces; an SOA's
// serial, a timestamp, is zeroed.
func normalize(rr dns.RR) string {
	if soa, ok := rr.(*dns.SOA); ok {
		c := *soa
		c.Serial = 0
		rr = &c
	}
	return strings.Join(strings.Fields(rr.String()), " ")
}

// rr parses a record in zone-file syntax and normalises it.
func rr(format string, args ...any) string {
	r, err := dns.NewRR(fmt.Sprintf(format, args...))
	if err != nil {
		panic(fmt.Sprintf("bad expected record: %v", err))
	}
	return normalize(r)
}

// Replies.

// answer is a NOERROR, authoritative reply with these records.
func answer(rrs []string, extra ...string) reply {
	return reply{header: "NOERROR aa", answer: rrs, extra: extra}
}

// nodata is NOERROR without records, with zone's SOA for negative caching.
func (s *server) nodata(zone string) reply {
	return reply{header: "NOERROR aa", ns: []string{s.soa(zone)}}
}

// nxdomain is NXDOMAIN with zone's SOA.
func (s *server) nxdomain(zone string) reply {
	return reply{header: "NXDOMAIN aa", ns: []string{s.soa(zone)}}
}

var servfail = reply{header: "SERVFAIL"}

// Records with the server's TTL.

// addrs are A or AAAA records of name, by each address's family.
func (s *server) addrs(name string, ips ...string) []string {
	var out []string
	for _, ip := range ips {
		typ := "A"
		if strings.Contains(ip, ":") {
			typ = "AAAA"
		}
		out = append(out, rr("%s %d IN %s %s", name, s.ttl, typ, ip))
	}
	return out
}

func (s *server) srv(owner string, weight, port int, target string) string {
	return rr("%s %d IN SRV 0 %d %d %s", owner, s.ttl, weight, port, target)
}

// soa is the zone's SOA as mcs and the kubernetes plugin write it: TTL
// capped at 300 s, minimum TTL the configured one.
func (s *server) soa(zone string) string {
	return rr("%s %d IN SOA ns.dns.%s hostmaster.%s 0 7200 1800 86400 %d", zone, min(s.ttl, 300), zone, zone, s.ttl)
}
