//go:build lab

package e2e

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// TestClusterset: the clusterset.local zone per the KEP-1645 DNS
// specification, for a dual-stack ClusterSetIP import "api" and a headless
// import "db" with endpoints in member1 itself, member2, and member3 (none
// of them ready there).
func TestClusterset(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	f.apply(
		f.serviceImport("api", importSpec{ips: []string{"10.99.0.7", "fd00:99::7"}}),
		f.serviceImport("db", importSpec{headless: true}),
		f.importedSlice("db", self, ep("10.10.5.1").named("db-0")),
		f.importedSlice("db", member2, ep("10.12.5.1").named("db-0"), ep("10.12.5.2")),
		f.importedSlice("db", member3, ep("10.14.5.1").named("db-0").unready()),
	)
	s, ttl600 := srv.vip, srv.endpoints
	api, apiHTTP := f.clusterset("api"), f.clusterset("_http", "_tcp", "api")
	db, dbHTTP := f.clusterset("db"), f.clusterset("_http", "_tcp", "db")
	db0self, db0member2, dashed := f.clusterset("db-0", self, "db"), f.clusterset("db-0", member2, "db"), f.clusterset("10-12-5-2", member2, "db")
	const zone = "clusterset.local."
	runQueries(t, []query{
		{"ClusterSetIP/A", s, api, dns.TypeA, "", answer(s.addrs(api, "10.99.0.7"))},
		{"ClusterSetIP/AAAA", s, api, dns.TypeAAAA, "", answer(s.addrs(api, "fd00:99::7"))},
		{"ClusterSetIP/A over TCP", s, api, dns.TypeA, "tcp", answer(s.addrs(api, "10.99.0.7"))},
		{"ClusterSetIP/SRV by port", s, apiHTTP, dns.TypeSRV, "", answer(
			[]string{s.srv(apiHTTP, 100, 80, api)}, s.addrs(api, "10.99.0.7", "fd00:99::7")...)},
		{"ClusterSetIP/SRV of every port", s, api, dns.TypeSRV, "", answer(
			[]string{s.srv(api, 50, 80, api), s.srv(api, 50, 53, api)}, s.addrs(api, "10.99.0.7", "fd00:99::7")...)},
		{"ClusterSetIP/TXT is NODATA", s, api, dns.TypeTXT, "", s.nodata(zone)},
		{"ClusterSetIP/_proto is NODATA", s, f.clusterset("_tcp", "api"), dns.TypeA, "", s.nodata(zone)},
		{"ClusterSetIP/unknown port is NXDOMAIN", s, f.clusterset("_https", "_tcp", "api"), dns.TypeSRV, "", s.nxdomain(zone)},
		{"ClusterSetIP/cluster id is NXDOMAIN", s, f.clusterset(member2, "api"), dns.TypeA, "", s.nxdomain(zone)},
		{"ClusterSetIP/ttl 600", ttl600, api, dns.TypeA, "", answer(ttl600.addrs(api, "10.99.0.7"))},
		{"ClusterSetIP/the case asked", s, strings.ToUpper(api), dns.TypeA, "", answer(s.addrs(strings.ToUpper(api), "10.99.0.7"))},

		{"headless/A is every ready endpoint", s, db, dns.TypeA, "", answer(s.addrs(db, "10.10.5.1", "10.12.5.1", "10.12.5.2"))},
		{"headless/SRV", s, dbHTTP, dns.TypeSRV, "", answer([]string{
			s.srv(dbHTTP, 33, 80, db0self), s.srv(dbHTTP, 33, 80, db0member2), s.srv(dbHTTP, 33, 80, dashed),
		}, append(append(s.addrs(db0self, "10.10.5.1"), s.addrs(db0member2, "10.12.5.1")...), s.addrs(dashed, "10.12.5.2")...)...)},
		{"headless/endpoint", s, db0member2, dns.TypeA, "", answer(s.addrs(db0member2, "10.12.5.1"))},
		{"headless/endpoint of this cluster", s, db0self, dns.TypeA, "", answer(s.addrs(db0self, "10.10.5.1"))},
		{"headless/endpoint without hostname", s, dashed, dns.TypeA, "", answer(s.addrs(dashed, "10.12.5.2"))},
		{"headless/endpoint AAAA is NODATA", s, db0member2, dns.TypeAAAA, "", s.nodata(zone)},
		{"headless/unknown endpoint is NXDOMAIN", s, f.clusterset("db-9", member2, "db"), dns.TypeA, "", s.nxdomain(zone)},
		{"headless/cluster id is NODATA", s, f.clusterset(member2, "db"), dns.TypeA, "", s.nodata(zone)},
		{"headless/cluster without ready endpoints is NXDOMAIN", s, f.clusterset(member3, "db"), dns.TypeA, "", s.nxdomain(zone)},
		{"headless/endpoint not ready is NXDOMAIN", s, f.clusterset("db-0", member3, "db"), dns.TypeA, "", s.nxdomain(zone)},

		{"missing service is NXDOMAIN", s, f.clusterset("missing"), dns.TypeA, "", s.nxdomain(zone)},
		{"missing service with ttl 600", ttl600, f.clusterset("missing"), dns.TypeA, "", ttl600.nxdomain(zone)},
		{"namespace is NODATA", s, f.ns + ".svc." + zone, dns.TypeA, "", s.nodata(zone)},
		{"unknown namespace is NXDOMAIN", s, "no-" + f.ns + ".svc." + zone, dns.TypeA, "", s.nxdomain(zone)},
		{"apex/SOA", s, zone, dns.TypeSOA, "", answer([]string{s.soa(zone)})},
		{"apex/NS", s, zone, dns.TypeNS, "", answer([]string{rr("%s %d IN NS ns.dns.%s", zone, s.ttl, zone)})},
		{"apex/A is NODATA", s, zone, dns.TypeA, "", s.nodata(zone)},
		{"dns-version/TXT", s, "dns-version." + zone, dns.TypeTXT, "", answer([]string{rr(`dns-version.%s %d IN TXT "1.0.0"`, zone, s.ttl)})},
		{"dns-version/A is NODATA", s, "dns-version." + zone, dns.TypeA, "", s.nodata(zone)},
	})
}

// TestClustersetHeadlessWithoutReadyEndpoints: a headless import exists
// only while one of its endpoints is ready.
func TestClustersetHeadlessWithoutReadyEndpoints(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	s, db := srv.vip, f.clusterset("db")
	endpoints := []endpoint{ep("10.12.7.1"), ep("10.12.7.2")}
	oneReady := f.importedSlice("db", member2, endpoints[0], endpoints[1].unready())
	f.apply(f.serviceImport("db", importSpec{headless: true}), oneReady)
	s.expect(t, db, dns.TypeA, answer(s.addrs(db, "10.12.7.1")))

	f.apply(f.importedSlice("db", member2, unready(endpoints...)...))
	s.expect(t, db, dns.TypeA, s.nxdomain("clusterset.local."))

	f.apply(oneReady)
	s.expect(t, db, dns.TypeA, answer(s.addrs(db, "10.12.7.1")))
}
