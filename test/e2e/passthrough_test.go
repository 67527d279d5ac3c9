//go:build lab

package e2e

import (
	"testing"

	"github.com/miekg/dns"
)

// TestKubernetesAnswersUntouched: a cluster.local name that is not
// multi-cluster gets, byte for byte, the answer of stock CoreDNS (a server
// block with the kubernetes plugin only), message ID aside. That includes an
// import without the strategy annotation when the strategy option is unset.
func TestKubernetesAnswersUntouched(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	f.apply(
		f.service("plain", false),
		f.ownSlice("plain", ep("10.10.8.1"), ep("10.10.8.2")),
		f.service("hl", true),
		f.ownSlice("hl", ep("10.10.8.3").named("hl-0")),
		f.service("imp", false),
		f.serviceImport("imp", importSpec{ips: []string{setVIP}}),
		f.ownSlice("imp", ep("10.10.8.4")),
		f.importedSlice("imp", member2, ep("10.12.8.1")),
	)
	for _, q := range []struct {
		name      string
		qname     string
		qtype     uint16
		rcode, an int // what the kubernetes plugin answers
	}{
		{"ClusterIP/A", f.native("plain"), dns.TypeA, dns.RcodeSuccess, 1},
		{"ClusterIP/AAAA", f.native("plain"), dns.TypeAAAA, dns.RcodeSuccess, 0},
		{"ClusterIP/TXT", f.native("plain"), dns.TypeTXT, dns.RcodeSuccess, 0},
		{"ClusterIP/SRV", f.native("plain"), dns.TypeSRV, dns.RcodeSuccess, 2},
		{"ClusterIP/SRV by port", f.native("_http", "_tcp", "plain"), dns.TypeSRV, dns.RcodeSuccess, 1},
		{"headless/A", f.native("hl"), dns.TypeA, dns.RcodeSuccess, 1},
		{"headless/endpoint", f.native("hl-0", "hl"), dns.TypeA, dns.RcodeSuccess, 1},
		{"headless/SRV", f.native("hl"), dns.TypeSRV, dns.RcodeSuccess, 2},
		{"missing service", f.native("missing"), dns.TypeA, dns.RcodeNameError, 0},
		{"import without annotation", f.native("imp"), dns.TypeA, dns.RcodeSuccess, 1},
		{"import without annotation/SRV", f.native("imp"), dns.TypeSRV, dns.RcodeSuccess, 2},
		{"namespace", f.ns + ".svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, 0},
		{"apex SOA", "cluster.local.", dns.TypeSOA, dns.RcodeSuccess, 1},
	} {
		for _, s := range []struct {
			block string
			s     *server
		}{{"vip", srv.vip}, {"endpoints", srv.endpoints}} {
			t.Run(q.name+"/"+s.block, func(t *testing.T) {
				expectSame(t, s.s, srv.kubernetes, q.qname, q.qtype, q.rcode, q.an)
			})
		}
	}
}
