package mcs

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func clustersetObjects() []runtime.Object {
	web := []portSpec{{"http", "TCP", 8080}}
	return []runtime.Object{
		namespaceObj("demo"),
		importObj("demo", "serve", []string{vipSet, "fd00::9"}, []portSpec{httpPort, dnsPort, {"", "TCP", 9000}}),
		importObj("demo", "web", nil, web, headlessImport),
		importObj("demo", "empty", nil, web, headlessImport),
		importedSlice("demo", "web", self, "web-a", web, ep{ip: "10.1.0.5", hostname: "web-0"}),
		importedSlice("demo", "web", "member2", "web-b", web, ep{ip: "10.2.0.5", hostname: "web-0"}, ep{ip: "10.2.0.6", hostname: "web-1"}, ep{ip: "10.2.0.7", notReady: true}),
		importedSlice("demo", "empty", "member2", "empty-b", web, ep{ip: "10.2.0.8", notReady: true}),
	}
}

const csSOA = "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 1 7200 1800 86400 5"

func nx(name string, qtype uint16) test.Case {
	return test.Case{Qname: name, Qtype: qtype, Rcode: dns.RcodeNameError, Authoritative: true, Ns: []dns.RR{test.SOA(csSOA)}}
}

func nodataCase(name string, qtype uint16) test.Case {
	return test.Case{Qname: name, Qtype: qtype, Authoritative: true, Ns: []dns.RR{test.SOA(csSOA)}}
}

func TestClustersetServices(t *testing.T) {
	f := newFixture(t, baseConfig(), clustersetObjects()...)
	vipGlue := []dns.RR{
		test.A("serve.demo.svc.clusterset.local. 5 IN A 10.96.9.9"),
		test.AAAA("serve.demo.svc.clusterset.local. 5 IN AAAA fd00::9"),
	}
	f.check([]test.Case{
		{Qname: "serve.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("serve.demo.svc.clusterset.local. 5 IN A 10.96.9.9")}},
		{Qname: "serve.demo.svc.clusterset.local.", Qtype: dns.TypeAAAA, Authoritative: true, Answer: []dns.RR{test.AAAA("serve.demo.svc.clusterset.local. 5 IN AAAA fd00::9")}},
		nodataCase("serve.demo.svc.clusterset.local.", dns.TypeMX),
		{Qname: "serve.demo.svc.clusterset.local.", Qtype: dns.TypeSRV, Authoritative: true, Answer: []dns.RR{
			test.SRV("serve.demo.svc.clusterset.local. 5 IN SRV 0 33 53 serve.demo.svc.clusterset.local."),
			test.SRV("serve.demo.svc.clusterset.local. 5 IN SRV 0 33 80 serve.demo.svc.clusterset.local."),
			test.SRV("serve.demo.svc.clusterset.local. 5 IN SRV 0 33 9000 serve.demo.svc.clusterset.local."),
		}, Extra: vipGlue},
		{Qname: "_http._tcp.serve.demo.svc.clusterset.local.", Qtype: dns.TypeSRV, Authoritative: true, Answer: []dns.RR{
			test.SRV("_http._tcp.serve.demo.svc.clusterset.local. 5 IN SRV 0 100 80 serve.demo.svc.clusterset.local."),
		}, Extra: vipGlue},
		nx("_grpc._tcp.serve.demo.svc.clusterset.local.", dns.TypeSRV),
		nodataCase("_http._tcp.serve.demo.svc.clusterset.local.", dns.TypeA),
		nodataCase("_tcp.serve.demo.svc.clusterset.local.", dns.TypeA),
		nx("_sctp.serve.demo.svc.clusterset.local.", dns.TypeA),
		nx("member1.serve.demo.svc.clusterset.local.", dns.TypeA),
		nx("web-0.member1.serve.demo.svc.clusterset.local.", dns.TypeA),

		{Qname: "web.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("web.demo.svc.clusterset.local. 5 IN A 10.1.0.5"),
			test.A("web.demo.svc.clusterset.local. 5 IN A 10.2.0.5"),
			test.A("web.demo.svc.clusterset.local. 5 IN A 10.2.0.6"),
		}},
		nodataCase("web.demo.svc.clusterset.local.", dns.TypeAAAA),
		{Qname: "web-0.member2.web.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("web-0.member2.web.demo.svc.clusterset.local. 5 IN A 10.2.0.5"),
		}},
		{Qname: "web-0.member1.web.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("web-0.member1.web.demo.svc.clusterset.local. 5 IN A 10.1.0.5"),
		}},
		nodataCase("web-0.member1.web.demo.svc.clusterset.local.", dns.TypeTXT),
		nx("web-9.member2.web.demo.svc.clusterset.local.", dns.TypeA),
		nx("10-2-0-7.member2.web.demo.svc.clusterset.local.", dns.TypeA), // not ready
		nodataCase("member2.web.demo.svc.clusterset.local.", dns.TypeA),
		nx("member9.web.demo.svc.clusterset.local.", dns.TypeA),
		{Qname: "_http._tcp.web.demo.svc.clusterset.local.", Qtype: dns.TypeSRV, Authoritative: true, Answer: []dns.RR{
			test.SRV("_http._tcp.web.demo.svc.clusterset.local. 5 IN SRV 0 33 8080 web-0.member1.web.demo.svc.clusterset.local."),
			test.SRV("_http._tcp.web.demo.svc.clusterset.local. 5 IN SRV 0 33 8080 web-0.member2.web.demo.svc.clusterset.local."),
			test.SRV("_http._tcp.web.demo.svc.clusterset.local. 5 IN SRV 0 33 8080 web-1.member2.web.demo.svc.clusterset.local."),
		}, Extra: []dns.RR{
			test.A("web-0.member1.web.demo.svc.clusterset.local. 5 IN A 10.1.0.5"),
			test.A("web-0.member2.web.demo.svc.clusterset.local. 5 IN A 10.2.0.5"),
			test.A("web-1.member2.web.demo.svc.clusterset.local. 5 IN A 10.2.0.6"),
		}},
		nodataCase("_tcp.web.demo.svc.clusterset.local.", dns.TypeA),

		nx("empty.demo.svc.clusterset.local.", dns.TypeA),
		nx("empty.demo.svc.clusterset.local.", dns.TypeSRV),
		nx("nope.demo.svc.clusterset.local.", dns.TypeA),
		nx("a.b.c.web.demo.svc.clusterset.local.", dns.TypeA),
		nodataCase("demo.svc.clusterset.local.", dns.TypeA),
		nx("other.svc.clusterset.local.", dns.TypeA),
		nodataCase("svc.clusterset.local.", dns.TypeA),
	})
}

func TestClustersetApexAndMeta(t *testing.T) {
	f := newFixture(t, baseConfig())
	f.m.setNSAddrs([]net.IP{net.ParseIP("10.0.0.10").To4()})
	f.check([]test.Case{
		{Qname: "dns-version.clusterset.local.", Qtype: dns.TypeTXT, Authoritative: true, Answer: []dns.RR{test.TXT(`dns-version.clusterset.local. 5 IN TXT "1.0.0"`)}},
		nodataCase("dns-version.clusterset.local.", dns.TypeA),
		{Qname: "clusterset.local.", Qtype: dns.TypeSOA, Authoritative: true, Answer: []dns.RR{test.SOA(csSOA)}},
		{Qname: "clusterset.local.", Qtype: dns.TypeNS, Authoritative: true,
			Answer: []dns.RR{test.NS("clusterset.local. 5 IN NS ns.dns.clusterset.local.")},
			Extra:  []dns.RR{test.A("ns.dns.clusterset.local. 5 IN A 10.0.0.10")}},
		{Qname: "ns.dns.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("ns.dns.clusterset.local. 5 IN A 10.0.0.10")}},
		nodataCase("ns.dns.clusterset.local.", dns.TypeAAAA),
		nodataCase("clusterset.local.", dns.TypeA),
		nodataCase("dns.clusterset.local.", dns.TypeA),
		nx("foo.clusterset.local.", dns.TypeA),
		nx("x.pod.clusterset.local.", dns.TypeA),
	})
}

func TestClustersetRefusesTransfers(t *testing.T) {
	f := newFixture(t, baseConfig())
	r := new(dns.Msg)
	r.SetQuestion(clustersetZone, dns.TypeAXFR)
	rcode, err := f.m.ServeDNS(context.Background(), dnstest.NewRecorder(&test.ResponseWriter{}), r)
	if rcode != dns.RcodeRefused || err != nil {
		t.Fatalf("AXFR: rcode %d, err %v", rcode, err)
	}
}

func TestClustersetFallthrough(t *testing.T) {
	cfg := baseConfig()
	cfg.fall = fall.F{Zones: []string{clustersetZone}}
	f := newFixture(t, cfg, clustersetObjects()...)
	for _, name := range []string{"nope.demo.svc.clusterset.local.", "foo.clusterset.local."} {
		if resp := f.query(name, dns.TypeA); !passedOn(resp) {
			t.Errorf("%s: want fallthrough, got\n%s", name, resp)
		}
	}
	if resp := f.query("serve.demo.svc.clusterset.local.", dns.TypeA); len(resp.Answer) != 1 {
		t.Errorf("known names are still answered, got\n%s", resp)
	}
}

// A stale source cluster leaves the clusterset set while others are left,
// but its per-endpoint names still answer: they name the cluster.
func TestClustersetStale(t *testing.T) {
	objs := append(clustersetObjects(), leaseObj("member2", time.Now().Add(-time.Hour), 30))
	f := newFixture(t, baseConfig(), objs...)
	if got := addresses(f.query("web.demo.svc.clusterset.local.", dns.TypeA)); !slices.Equal(got, []string{"10.1.0.5"}) {
		t.Fatalf("want member1 only, got %v", got)
	}
	if got := addresses(f.query("web-1.member2.web.demo.svc.clusterset.local.", dns.TypeA)); !slices.Equal(got, []string{"10.2.0.6"}) {
		t.Fatalf("want member2's web-1, got %v", got)
	}
}

func TestClustersetTTL(t *testing.T) {
	cfg := baseConfig()
	cfg.ttl = 0
	f := newFixture(t, cfg, clustersetObjects()...)
	f.check([]test.Case{
		{Qname: "serve.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("serve.demo.svc.clusterset.local. 0 IN A 10.96.9.9")}},
		{Qname: "nope.demo.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Authoritative: true,
			Ns: []dns.RR{test.SOA("clusterset.local. 0 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 1 7200 1800 86400 0")}},
	})
}

// The glue of ns.dns is what the kubernetes plugin answers for its own
// ns.dns: the ClusterIP of the Service whose endpoint this server is.
func TestClustersetNSGlueIsTheService(t *testing.T) {
	f := newFixture(t, baseConfig(),
		serviceObj("kube-system", "kube-dns", []string{testClusterIP}),
		localSlice("kube-system", "kube-dns", "kube-dns-a", nil, ep{ip: "10.0.0.10"}, ep{ip: "10.0.0.11"}))
	f.m.setNSAddrs([]net.IP{net.ParseIP("10.0.0.10").To4()})
	f.check([]test.Case{
		{Qname: "ns.dns.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("ns.dns.clusterset.local. 5 IN A " + testClusterIP)}},
		{Qname: "clusterset.local.", Qtype: dns.TypeNS, Authoritative: true,
			Answer: []dns.RR{test.NS("clusterset.local. 5 IN NS ns.dns.clusterset.local.")},
			Extra:  []dns.RR{test.A("ns.dns.clusterset.local. 5 IN A " + testClusterIP)}},
	})
}

// The glue follows the index: the server's Service appears, its endpoint
// moves, and it goes, and ns.dns answers the ClusterIP, then the server's
// own address again, with no query scanning the index.
func TestClustersetNSGlueFollowsChanges(t *testing.T) {
	f := newFixture(t, baseConfig())
	f.m.setNSAddrs([]net.IP{net.ParseIP("10.0.0.10").To4()})
	glue := func(want string) {
		t.Helper()
		f.waitFor(func() bool {
			got := addresses(f.query("ns.dns.clusterset.local.", dns.TypeA))
			return len(got) == 1 && got[0] == want
		}, "ns.dns answering "+want)
	}
	glue("10.0.0.10")
	ctx, slices := t.Context(), f.kube.DiscoveryV1().EndpointSlices("kube-system")
	if _, err := f.kube.CoreV1().Services("kube-system").Create(ctx, serviceObj("kube-system", "kube-dns", []string{testClusterIP}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := slices.Create(ctx, localSlice("kube-system", "kube-dns", "kube-dns-a", nil, ep{ip: "10.0.0.10"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	glue(testClusterIP)
	if _, err := slices.Update(ctx, localSlice("kube-system", "kube-dns", "kube-dns-a", nil, ep{ip: "10.0.0.99"}), metav1UpdateOptions); err != nil {
		t.Fatal(err)
	}
	glue("10.0.0.10")
}

// A provider that lost a port conflict has its slices imported without
// that port (mcs-controller, desired/slices.go): a headless import still
// answers its endpoints' addresses and per-endpoint names, and the port's
// SRV targets the clusters that expose it as the import defines it.
func TestClustersetHeadlessPortLost(t *testing.T) {
	tcp := []portSpec{{"tcp", "TCP", 42}}
	f := newFixture(t, baseConfig(),
		namespaceObj("demo"),
		importObj("demo", "hello", nil, tcp, headlessImport),
		importedSlice("demo", "hello", self, "hello-a", tcp, ep{ip: "10.1.0.5", hostname: "hello-0"}),
		importedSlice("demo", "hello", "member2", "hello-b", nil, ep{ip: "10.2.0.5", hostname: "hello-0"}),
	)
	f.check([]test.Case{
		{Qname: "hello.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("hello.demo.svc.clusterset.local. 5 IN A 10.1.0.5"),
			test.A("hello.demo.svc.clusterset.local. 5 IN A 10.2.0.5"),
		}},
		{Qname: "hello-0.member2.hello.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("hello-0.member2.hello.demo.svc.clusterset.local. 5 IN A 10.2.0.5"),
		}},
		{Qname: "_tcp._tcp.hello.demo.svc.clusterset.local.", Qtype: dns.TypeSRV, Authoritative: true, Answer: []dns.RR{
			test.SRV("_tcp._tcp.hello.demo.svc.clusterset.local. 5 IN SRV 0 100 42 hello-0.member1.hello.demo.svc.clusterset.local."),
		}, Extra: []dns.RR{
			test.A("hello-0.member1.hello.demo.svc.clusterset.local. 5 IN A 10.1.0.5"),
		}},
	})
}
