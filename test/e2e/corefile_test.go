//go:build lab

package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// TestLabCorefile: corefile/lab.Corefile, run as its header says, starts,
// becomes ready, answers a multi-cluster service's native and clusterset
// names with its clusterset VIP (answer vip, as the shipped Corefile), and
// a remote endpoint's address by the clusterset name, and leaves other
// names to the kubernetes plugin.
func TestLabCorefile(t *testing.T) {
	file := filepath.Join(labtest.Get(t).Root(), "corefile", "lab.Corefile")
	p := startCoreDNS(t, config{file: file, blocks: []block{{mcs: true, ttl: 5}}})
	p.waitReady(t, 20*time.Second)
	s := p.servers[0]

	f := newFixture(t)
	f.apply(
		f.service("api", false),
		f.serviceImport("api", importSpec{strategy: remoteAndLocal, ips: []string{setVIP}}),
		f.ownSlice("api", ep("10.10.9.1")),
		f.importedSlice("api", member2, ep("10.12.231.1")),
		f.service("plain", false),
	)
	api := f.native("api")
	s.expectWithin(t, 10*time.Second, api, dns.TypeA, answer(s.addrs(api, setVIP)))
	s.expect(t, f.clusterset("api"), dns.TypeA, answer(s.addrs(f.clusterset("api"), setVIP)))
	s.expect(t, reverseName(t, "10.12.231.1"), dns.TypePTR, ptrReply(t, "10.12.231.1", s.ttl, f.clusterset("api")))
	plain := f.native("plain")
	s.expect(t, plain, dns.TypeA, answer(s.addrs(plain, f.clusterIP("plain"))))
}
