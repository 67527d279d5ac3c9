//go:build lab

package e2e

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// TestReverse: with the reverse zones in its stanza, mcs answers the PTR
// query of an endpoint imported from another cluster with its clusterset
// name, a local pod's address that another cluster's slice claims with the
// local name alone (one PTR per address), and every other address (this
// cluster's own imported copy, an unknown one) keeps the kubernetes
// plugin's answer, byte for byte.
// The addresses are this test's own: PTR looks at every namespace.
func TestReverse(t *testing.T) {
	p := startCoreDNS(t, config{blocks: []block{{mcs: true, ttl: 5, reverse: true}, {ttl: 5, reverse: true}}})
	p.waitReady(t, 20*time.Second)
	s, kube := p.servers[0], p.servers[1]
	f := newFixture(t)
	f.apply(
		f.service("web", true),
		f.serviceImport("web", importSpec{headless: true}),
		f.ownSlice("web", ep("10.10.230.1").named("web-0")),
		f.importedSlice("web", self, ep("10.10.230.1").named("web-0")),
		f.importedSlice("web", member2, ep("10.12.230.1").named("web-0"), ep("10.12.230.2")),
		f.importedSlice("web", member3, ep("fd00:13:230::1").named("web-1")),
		f.serviceImport("api", importSpec{ips: []string{"10.99.230.1"}}),
		f.importedSlice("api", member3, ep("10.13.230.1")),
		// member2 claims the local pod's address: its reverse name stays
		// the local one.
		f.serviceImport("claim", importSpec{headless: true}),
		f.importedSlice("claim", member2, ep("10.10.230.1").named("web-0")),
	)
	reverse := func(ip string) string { return reverseName(t, ip) }
	ptrs := func(ip string, ttl uint32, targets ...string) reply { return ptrReply(t, ip, ttl, targets...) }
	for _, c := range []struct {
		ip, target string
		qtype      uint16 // of the target's address record; 0 for a name that has none of its own
	}{
		{"10.12.230.1", f.clusterset("web-0", member2, "web"), dns.TypeA},
		{"10.12.230.2", f.clusterset("10-12-230-2", member2, "web"), dns.TypeA},
		{"fd00:13:230::1", f.clusterset("web-1", member3, "web"), dns.TypeAAAA},
		{"10.13.230.1", f.clusterset("api"), 0},
	} {
		s.expect(t, reverse(c.ip), dns.TypePTR, ptrs(c.ip, s.ttl, c.target))
		if c.qtype != 0 { // the name answers that address
			s.expect(t, c.target, c.qtype, answer(s.addrs(c.target, c.ip)))
		}
	}
	expectOrdinary(t, s, kube, []ordinaryQuery{
		{reverse("10.12.230.1"), dns.TypeA, dns.RcodeNameError, 0},    // not a PTR query
		{reverse("10.99.230.1"), dns.TypePTR, dns.RcodeNameError, 0},  // the clusterset IP: no derived Service here
		{reverse("10.10.230.99"), dns.TypePTR, dns.RcodeNameError, 0}, // nobody's
	})
	// A local pod, which member2 claims too: the kubernetes plugin names it,
	// and the imported copies under the derived Services (its own, and
	// member2's claim); mcs answers one PTR, the local name.
	kube.expect(t, reverse("10.10.230.1"), dns.TypePTR, ptrs("10.10.230.1", 5,
		f.native("web-0", api.DerivedPrefix+"claim"), f.native("web-0", api.DerivedPrefix+"web"), f.native("web-0", "web")))
	s.expect(t, reverse("10.10.230.1"), dns.TypePTR, ptrs("10.10.230.1", 5, f.native("web-0", "web")))
}

// reverseName is the PTR query name of ip.
func reverseName(t *testing.T, ip string) string {
	t.Helper()
	name, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// ptrReply answers the PTR query of ip with targets.
func ptrReply(t *testing.T, ip string, ttl uint32, targets ...string) reply {
	t.Helper()
	var rrs []string
	for _, target := range targets {
		rrs = append(rrs, rr("%s %d IN PTR %s", reverseName(t, ip), ttl, target))
	}
	return answer(rrs)
}
