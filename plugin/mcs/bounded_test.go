package mcs

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// A member may export a headless service of 100,000 endpoints and 100
// ports: an answer stops at what the client's message can hold (the
// server truncates the rest and sets TC), and a query of another type
// than SRV builds one SRV record at most, so no query of a service's name,
// native, clusterset or derived, costs in proportion to what a member
// exported.
func TestAnswersBoundedByTheMessage(t *testing.T) {
	var ports []portSpec
	for i := range 100 {
		ports = append(ports, portSpec{fmt.Sprintf("p%d", i), "TCP", int32(8000 + i)})
	}
	objs := []runtime.Object{namespaceObj("demo"), importObj("demo", "big", nil, ports[:1], headlessImport, withStrategy("RemoteAndLocal"))}
	for s := range 100 {
		var eps []ep
		for i := range 1000 {
			eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 100+s/64, s%64*4+i/250, i%250+1)})
		}
		objs = append(objs, importedSlice("demo", "big", "member2", fmt.Sprintf("s%d", s), ports, eps...))
	}
	f := newFixture(t, baseConfig(), objs...)
	f.waitFor(func() bool { return len(f.query("big.demo.svc.clusterset.local.", dns.TypeA).Answer) > 0 }, "the import")

	for _, tc := range []struct {
		name  string
		qtype uint16
		size  int // the client's message: 512 over UDP without EDNS, 65,535 over TCP
		tcp   bool
	}{
		{"big.demo.svc.clusterset.local.", dns.TypeA, 512, false},
		{"big.demo.svc.clusterset.local.", dns.TypeSRV, 512, false},
		{"big.demo.svc.clusterset.local.", dns.TypeA, 65535, true},
		{"big.demo.svc.clusterset.local.", dns.TypeSRV, 65535, true},
		{"_p7._tcp.big.demo.svc.clusterset.local.", dns.TypeSRV, 65535, true},
		{"big.demo.svc.cluster.local.", dns.TypeA, 65535, true},
		{"_p7._tcp.big.demo.svc.cluster.local.", dns.TypeSRV, 65535, true},
	} {
		m := queryOver(t, f.m, tc.name, tc.qtype, tc.tcp)
		if passedOn(m) {
			t.Fatalf("%s %s: passed on, want mcs's answer", tc.name, dns.TypeToString[tc.qtype])
		}
		if n := len(m.Answer) + len(m.Extra); n == 0 || n > tc.size/minRR {
			t.Errorf("%s %s over a %d-byte message: %d records built, want some, at most %d", tc.name, dns.TypeToString[tc.qtype], tc.size, n, tc.size/minRR)
		}
	}
	// The port exists: NODATA, and one SRV record at most was needed to say so.
	if m := queryOver(t, f.m, "_p7._tcp.big.demo.svc.clusterset.local.", dns.TypeTXT, true); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Errorf("TXT of a port name: %s with %d records, want NODATA", dns.RcodeToString[m.Rcode], len(m.Answer))
	}
	derivedBounded(t, f)
}

// derivedBounded: a derived name of the big service costs about what its
// clusterset name costs, whose answer is bounded by the message: it counts
// each slice's matches at once for the SRV weights instead of reading
// every endpoint and port (which cost it some 10,000 times more).
func derivedBounded(t *testing.T, f *fixture) {
	derived := serviceObj("demo", api.DerivedPrefix+"big", nil)
	derived.Labels = map[string]string{api.LabelManagedBy: api.ManagedBy}
	world := &kubeAPI{svcs: []corev1.Service{*derived}, nss: []corev1.Namespace{*namespaceObj("demo")}}
	k := kubePlugin(t, world.serve(t), memberLabels)
	f.m.Next, f.m.kube = k, kubePeerOf([]plugin.Handler{k})
	cost := func(name string, qtype uint16) time.Duration {
		if m := queryOver(t, f.m, name, qtype, false); len(m.Answer) == 0 {
			t.Fatalf("%s %s: no answer\n%s", name, dns.TypeToString[qtype], m)
		}
		r := testing.Benchmark(func(b *testing.B) {
			for b.Loop() {
				queryOver(t, f.m, name, qtype, false)
			}
		})
		return time.Duration(r.NsPerOp())
	}
	bounded := cost("big.demo.svc.clusterset.local.", dns.TypeA)
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"derived-big.demo.svc.cluster.local.", dns.TypeA},
		{"derived-big.demo.svc.cluster.local.", dns.TypeSRV},
		{"_p7._tcp.derived-big.demo.svc.cluster.local.", dns.TypeSRV},
	} {
		c := cost(q.name, q.qtype)
		t.Logf("%s %s: %v a query, the clusterset name %v", q.name, dns.TypeToString[q.qtype], c, bounded)
		if c > 50*bounded {
			t.Errorf("%s %s costs %v, the clusterset name %v: more than the message it fills", q.name, dns.TypeToString[q.qtype], c, bounded)
		}
	}
}

// An endpoint's first address is its address, as kube-proxy takes it.
func TestEndpointFirstAddressOnly(t *testing.T) {
	s := importedSlice("demo", "web", "member2", "a", []portSpec{httpPort}, ep{ip: "10.2.0.5"})
	s.Endpoints[0].Addresses = append(s.Endpoints[0].Addresses, "10.2.0.6", "10.2.0.7")
	f := newFixture(t, baseConfig(), namespaceObj("demo"), importObj("demo", "web", nil, []portSpec{httpPort}, headlessImport), s)
	f.waitFor(func() bool { return len(f.query("web.demo.svc.clusterset.local.", dns.TypeA).Answer) > 0 }, "the import")
	f.check([]test.Case{{Qname: "web.demo.svc.clusterset.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
		test.A("web.demo.svc.clusterset.local. 5 IN A 10.2.0.5"),
	}}})
}

// queryOver is serve over UDP without EDNS, or over TCP.
func queryOver(t *testing.T, m *MCS, name string, qtype uint16, tcp bool) *dns.Msg {
	t.Helper()
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	rec := dnstest.NewRecorder(&test.ResponseWriter{TCP: tcp})
	if _, err := m.ServeDNS(context.Background(), rec, r); err != nil || rec.Msg == nil {
		t.Fatalf("%s %s: %v, %v", name, dns.TypeToString[qtype], rec.Msg, err)
	}
	return rec.Msg
}
