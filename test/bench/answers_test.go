package main

import (
	"testing"

	"github.com/miekg/dns"
)

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

func TestDiffKinds(t *testing.T) {
	d := func(name string) answerDiff { return answerDiff{q: dnsQuery{name, dns.TypeA}} }
	got := diffKinds([]answerDiff{d("10-1-0-1.derived-svc-0.ns."), d("10-1-0-2.derived-svc-10.ns."), d("derived-headless-0.ns.")})
	if len(got) != 2 || got[0].kind != "A N-N-N-N.derived-svc-N.ns." || got[0].n != 2 || got[0].first.q.name != "10-1-0-1.derived-svc-0.ns." || got[1].n != 1 {
		t.Errorf("diffKinds = %+v", got)
	}
}
