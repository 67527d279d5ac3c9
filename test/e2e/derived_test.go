//go:build lab

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestDerivedNamesWithTheLabelsLine: with the shipped member Corefile's
// labels line the kubernetes plugin reads no imported slice, and mcs answers
// the names of the derived-<svc> Services as that plugin answers them from
// the slices: every such name gets the same answer from a block with the
// line as from one without it, the order within a section and the SOA
// serial aside. The addresses are this test's own: PTR looks at every
// namespace.
func TestDerivedNamesWithTheLabelsLine(t *testing.T) {
	labels := shippedLabelsLine(t)
	p := startCoreDNS(t, config{blocks: []block{
		{mcs: true, ttl: 5, reverse: true, kube: []string{labels}},
		{mcs: true, ttl: 5, reverse: true},
	}})
	p.waitReady(t, 20*time.Second)
	with, without := p.servers[0], p.servers[1]
	f := newFixture(t)
	f.apply(
		f.service("web", true),
		f.ownSlice("web", ep("10.10.231.1").named("web-0")),
		f.serviceImport("web", importSpec{headless: true}),
		f.derivedService("web", true),
		f.importedSlice("web", self, ep("10.10.231.1").named("web-0")),
		f.importedSlice("web", member2, ep("10.12.231.1").named("web-0"), ep("10.12.231.2")),
		f.serviceImport("api", importSpec{ips: []string{"10.99.231.1"}}),
		f.derivedService("api", false),
		f.importedSlice("api", member3, ep("10.13.231.1")),
	)
	for _, q := range []struct {
		name         string
		qtype        uint16
		rcode, count int // of the block without the line, which the other must match
	}{
		{f.native("derived-web"), dns.TypeA, dns.RcodeSuccess, 3},
		{f.native("derived-web"), dns.TypeAAAA, dns.RcodeSuccess, 0},
		{f.native("derived-web"), dns.TypeSRV, dns.RcodeSuccess, 4},
		{f.native("_http", "_tcp", "derived-web"), dns.TypeSRV, dns.RcodeSuccess, 2},
		{f.native("web-0", "derived-web"), dns.TypeA, dns.RcodeSuccess, 2},
		{f.native("10-12-231-2", "derived-web"), dns.TypeA, dns.RcodeSuccess, 1},
		{f.native("nobody", "derived-web"), dns.TypeA, dns.RcodeNameError, 0},
		{f.native("derived-api"), dns.TypeA, dns.RcodeSuccess, 1},
		{f.native("10-13-231-1", "derived-api"), dns.TypeA, dns.RcodeSuccess, 1},
		{reverseName(t, "10.10.231.1"), dns.TypePTR, dns.RcodeSuccess, 1}, // the local pod's name alone: one PTR an address
		{reverseName(t, "10.12.231.1"), dns.TypePTR, dns.RcodeSuccess, 1},
		{reverseName(t, "10.13.231.1"), dns.TypePTR, dns.RcodeSuccess, 1},
	} {
		expectAlike(t, with, without, q.name, q.qtype, q.rcode, q.count)
	}
}

// shippedLabelsLine is the labels line of corefile/Corefile's kubernetes
// block.
func shippedLabelsLine(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../corefile/Corefile")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if l := strings.TrimSpace(line); strings.HasPrefix(l, "labels ") {
			return l
		}
	}
	t.Fatal("corefile/Corefile has no labels line")
	return ""
}
