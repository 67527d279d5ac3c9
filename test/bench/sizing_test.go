package main

import (
	"testing"

	"github.com/miekg/dns"
)

func TestParseGoMemLimit(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512B": 512, "3KiB": 3 << 10, "460MiB": 460 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40} {
		if got, err := parseGoMemLimit(in); err != nil || got != want {
			t.Errorf("parseGoMemLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1MB", "1.5GiB", "MiB"} {
		if _, err := parseGoMemLimit(in); err == nil {
			t.Errorf("parseGoMemLimit(%q) took it", in)
		}
	}
}

// What make bench prints as shipped is deploy/member's, and meets the rule
// for the figures it was sized from.
func TestReadShipped(t *testing.T) {
	s, err := readShipped("../..")
	if err != nil {
		t.Fatal(err)
	}
	if s.request <= 0 || s.limit <= s.request || s.goMemLimit <= 0 {
		t.Fatalf("deploy/member's CoreDNS: request %d, limit %d, GOMEMLIMIT %d; want all set, the limit above the request", s.request, s.limit, s.goMemLimit)
	}
	fits := memoryReading{rss: s.request, hwm: int64(float64(s.limit) / limitPerPeak)}
	for _, c := range s.checks(fits) {
		if !c.met() {
			t.Errorf("%s: have %d, want %d", c.what, c.have, c.want)
		}
	}
	if c := s.checks(memoryReading{rss: s.request + 1, hwm: s.limit})[:2]; c[0].met() || c[1].met() {
		t.Errorf("a process past the request and half the limit passes: %+v", c)
	}
}

// Two answers alike but for what differs between any two replicas compare
// equal; a missing record does not.
func TestNormalised(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("x.ns.svc.cluster.local.", dns.TypeA)
	a, b := new(dns.Msg), new(dns.Msg)
	a.SetReply(q)
	b.SetReply(q)
	b.Id++
	rr := func(s string) dns.RR { r, _ := dns.NewRR(s); return r }
	a.Answer = []dns.RR{rr("x.ns.svc.cluster.local. 5 IN A 10.0.0.1"), rr("x.ns.svc.cluster.local. 5 IN A 10.0.0.2")}
	b.Answer = []dns.RR{a.Answer[1], a.Answer[0]}
	a.Ns = []dns.RR{rr("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1700000000 7200 1800 86400 5")}
	b.Ns = []dns.RR{rr("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1700000009 7200 1800 86400 5")}
	if string(normalised(a)) != string(normalised(b)) {
		t.Errorf("alike answers differ:\n%s\n%s", a, b)
	}
	b.Answer = b.Answer[:1]
	if string(normalised(a)) == string(normalised(b)) {
		t.Errorf("an answer without a record compares equal")
	}
}
