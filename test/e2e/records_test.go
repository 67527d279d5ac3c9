//go:build lab

package e2e

import (
	"testing"

	"github.com/miekg/dns"
)

// query is one question and the reply it must get.
type query struct {
	name    string
	s       *server
	qname   string
	qtype   uint16
	network string // "" is udp
	want    reply
}

func runQueries(t *testing.T, queries []query) {
	t.Helper()
	for _, q := range queries {
		t.Run(q.name, func(t *testing.T) {
			network := q.network
			if network == "" {
				network = "udp"
			}
			q.s.expectOver(t, network, q.qname, q.qtype, q.want)
		})
	}
}

// TestNativeRecordTypes: A, AAAA and SRV of cluster.local names follow the
// chosen set, VIPs or endpoints; other types are NODATA; ports that the set
// does not have go to the kubernetes plugin.
func TestNativeRecordTypes(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	f.apply(
		f.service("api", false),
		f.serviceImport("api", importSpec{strategy: remoteAndLocal, ips: []string{"10.99.0.7", "fd00:99::7"}}),
		f.ownSlice("api", ep("10.10.3.1")),
		f.importedSlice("api", member2, ep("10.12.3.1")),
		f.importedSlice("api", member3, ep("fd00:14::1")),
	)
	api, httpSRV, dnsSRV := f.native("api"), f.native("_http", "_tcp", "api"), f.native("_dns", "_udp", "api")
	vip, eps := srv.vip, srv.endpoints
	target := func(host string) string { return host + "." + api }
	runQueries(t, []query{
		{"vip/A", vip, api, dns.TypeA, "", answer(vip.addrs(api, "10.99.0.7"))},
		{"vip/AAAA", vip, api, dns.TypeAAAA, "", answer(vip.addrs(api, "fd00:99::7"))},
		{"vip/SRV by port", vip, httpSRV, dns.TypeSRV, "", answer(
			[]string{vip.srv(httpSRV, 100, 80, api)}, vip.addrs(api, "10.99.0.7", "fd00:99::7")...)},
		{"vip/SRV of every port", vip, api, dns.TypeSRV, "", answer(
			[]string{vip.srv(api, 50, 80, api), vip.srv(api, 50, 53, api)}, vip.addrs(api, "10.99.0.7", "fd00:99::7")...)},
		{"vip/TXT is NODATA", vip, api, dns.TypeTXT, "", vip.nodata("cluster.local.")},
		{"endpoints/A", eps, api, dns.TypeA, "", answer(eps.addrs(api, "10.10.3.1", "10.12.3.1"))},
		{"endpoints/A over TCP", eps, api, dns.TypeA, "tcp", answer(eps.addrs(api, "10.10.3.1", "10.12.3.1"))},
		{"endpoints/AAAA", eps, api, dns.TypeAAAA, "", answer(eps.addrs(api, "fd00:14::1"))},
		{"endpoints/SRV by port", eps, dnsSRV, dns.TypeSRV, "", answer([]string{
			eps.srv(dnsSRV, 33, 53, target("10-10-3-1")),
			eps.srv(dnsSRV, 33, 53, target("10-12-3-1")),
			eps.srv(dnsSRV, 33, 53, target("fd00-14--1")),
		}, append(append(eps.addrs(target("10-10-3-1"), "10.10.3.1"), eps.addrs(target("10-12-3-1"), "10.12.3.1")...), eps.addrs(target("fd00-14--1"), "fd00:14::1")...)...)},
		// ttl 600: the SOA's TTL is capped at 300 s, its minimum is 600.
		{"endpoints/TXT is NODATA", eps, api, dns.TypeTXT, "", eps.nodata("cluster.local.")},
	})
	t.Run("unknown port goes to kubernetes", func(t *testing.T) {
		expectSame(t, vip, srv.kubernetes, f.native("_https", "_tcp", "api"), dns.TypeSRV, dns.RcodeNameError, 0)
	})
}

// TestStatefulSetPodNames: per-endpoint names of a headless service answer
// the pods of every cluster, but a local pod's name is its own: under either
// strategy the local web-0 wins, and web-1, which runs only in member2, is
// the remote pod.
func TestStatefulSetPodNames(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	withStrategy := func(strategy string) {
		f.apply(
			f.service("web", true),
			f.serviceImport("web", importSpec{headless: true, strategy: strategy}),
			f.ownSlice("web", ep("10.10.1.10").named("web-0")),
			f.importedSlice("web", member2, ep("10.12.1.10").named("web-0"), ep("10.12.1.11").named("web-1")),
		)
	}
	s := srv.vip
	web0, web1, srvName := f.native("web-0", "web"), f.native("web-1", "web"), f.native("_http", "_tcp", "web")

	withStrategy(localFirst)
	runQueries(t, []query{
		{"LocalFirst/local pod", s, web0, dns.TypeA, "", answer(s.addrs(web0, "10.10.1.10"))},
		{"LocalFirst/remote pod", s, web1, dns.TypeA, "", answer(s.addrs(web1, "10.12.1.11"))},
		{"LocalFirst/AAAA is NODATA", s, web1, dns.TypeAAAA, "", s.nodata("cluster.local.")},
		{"LocalFirst/service", s, f.native("web"), dns.TypeA, "", answer(s.addrs(f.native("web"), "10.10.1.10"))},
		{"LocalFirst/SRV", s, srvName, dns.TypeSRV, "", answer(
			[]string{s.srv(srvName, 100, 80, web0)}, s.addrs(web0, "10.10.1.10")...)},
	})
	t.Run("LocalFirst/no such pod goes to kubernetes", func(t *testing.T) {
		expectSame(t, s, srv.kubernetes, f.native("web-2", "web"), dns.TypeA, dns.RcodeNameError, 0)
	})

	withStrategy(remoteAndLocal)
	runQueries(t, []query{
		{"RemoteAndLocal/pod in two clusters: the local one", s, web0, dns.TypeA, "", answer(s.addrs(web0, "10.10.1.10"))},
		{"RemoteAndLocal/remote pod", s, web1, dns.TypeA, "", answer(s.addrs(web1, "10.12.1.11"))},
		{"RemoteAndLocal/SRV", s, srvName, dns.TypeSRV, "", answer(
			[]string{s.srv(srvName, 50, 80, web0), s.srv(srvName, 50, 80, web1)},
			append(s.addrs(web0, "10.10.1.10"), s.addrs(web1, "10.12.1.11")...)...)},
	})
}
