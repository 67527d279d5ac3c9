package mcs

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

func reverseConfig() *config {
	cfg := baseConfig()
	cfg.zones = append(cfg.zones, "in-addr.arpa.", "ip6.arpa.")
	cfg.ttl = 30
	return cfg
}

func ptrName(t *testing.T, ip string) string {
	t.Helper()
	name, err := dns.ReverseAddr(ip)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

// TestReverse: the address of another cluster's imported endpoint answers
// its clusterset name; every other reverse name goes to the next plugin.
func TestReverse(t *testing.T) {
	f := newFixture(t, reverseConfig(),
		importObj("demo", "web", nil, []portSpec{httpPort}, headlessImport),
		importedSlice("demo", "web", "member2", "a", nil,
			ep{ip: "10.2.0.5", hostname: "web-0"}, ep{ip: "10.2.0.6"}, ep{ip: "fd00::5", hostname: "web-1"}, ep{ip: "10.2.0.7", notReady: true}),
		importedSlice("demo", "web", self, "own", nil, ep{ip: "10.1.0.99"}),
		localSlice("demo", "web", "local", nil, ep{ip: "10.1.0.5", hostname: "web-0"}),
		importObj("demo", "serve", []string{vipSet}, []portSpec{httpPort}),
		importedSlice("demo", "serve", "member3", "b", nil, ep{ip: "10.3.0.5"}, ep{ip: "10.2.0.5"}),
		importedSlice("demo", "gone", "member2", "c", nil, ep{ip: "10.2.0.9"}), // no ServiceImport
	)
	ptr := func(ip string, targets ...string) test.Case {
		tc := test.Case{Qname: ptrName(t, ip), Qtype: dns.TypePTR, Authoritative: true}
		for _, target := range targets {
			tc.Answer = append(tc.Answer, test.PTR(tc.Qname+" 30 IN PTR "+target))
		}
		return tc
	}
	f.check([]test.Case{
		// Headless: <hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local,
		// also when the address serves a ClusterSetIP import too.
		ptr("10.2.0.5", "serve.demo.svc.clusterset.local.", "web-0.member2.web.demo.svc.clusterset.local."),
		ptr("10.2.0.6", "10-2-0-6.member2.web.demo.svc.clusterset.local."),
		ptr("fd00::5", "web-1.member2.web.demo.svc.clusterset.local."),
		// ClusterSetIP: the service's clusterset name.
		ptr("10.3.0.5", "serve.demo.svc.clusterset.local."),
	})
	for _, q := range []struct {
		name  string
		qtype uint16
		why   string
	}{
		{ptrName(t, "10.1.0.5"), dns.TypePTR, "a local endpoint"},
		{ptrName(t, "10.1.0.99"), dns.TypePTR, "this cluster's own imported copy"},
		{ptrName(t, "10.2.0.7"), dns.TypePTR, "a not-ready endpoint"},
		{ptrName(t, "10.2.0.9"), dns.TypePTR, "a slice without a ServiceImport"},
		{ptrName(t, "10.96.9.9"), dns.TypePTR, "a clusterset VIP: the derived Service's"},
		{ptrName(t, "10.2.0.5"), dns.TypeA, "not a PTR query"},
		{"2.10.in-addr.arpa.", dns.TypePTR, "not an address"},
		{"in-addr.arpa.", dns.TypeSOA, "the apex"},
	} {
		if resp := f.query(q.name, q.qtype); !passedOn(resp) {
			t.Errorf("%s %s (%s): want passed on, got\n%s", q.name, dns.TypeToString[q.qtype], q.why, resp)
		}
	}
}

// TestReverseFollowsChanges: an address leaves with its endpoint, its
// slice, and its ServiceImport, and the name follows the import's type.
func TestReverseFollowsChanges(t *testing.T) {
	f := newFixture(t, reverseConfig(),
		importObj("demo", "web", nil, nil, headlessImport),
		importedSlice("demo", "web", "member2", "a", nil, ep{ip: "10.2.0.5", hostname: "web-0"}))
	name := ptrName(t, "10.2.0.5")
	answers := func(want string) func() bool {
		return func() bool {
			resp := f.query(name, dns.TypePTR)
			if want == "" {
				return passedOn(resp)
			}
			return len(resp.Answer) == 1 && resp.Answer[0].(*dns.PTR).Ptr == want
		}
	}
	f.waitFor(answers("web-0.member2.web.demo.svc.clusterset.local."), "the headless name")

	imports := f.mc.MulticlusterV1beta1().ServiceImports("demo")
	if _, err := imports.Update(t.Context(), importObj("demo", "web", []string{vipSet}, nil), metav1UpdateOptions); err != nil {
		t.Fatal(err)
	}
	f.waitFor(answers("web.demo.svc.clusterset.local."), "the ClusterSetIP name")

	slices := f.kube.DiscoveryV1().EndpointSlices("demo")
	moved := importedSlice("demo", "web", "member2", "a", nil, ep{ip: "10.2.0.6", hostname: "web-0"})
	if _, err := slices.Update(t.Context(), moved, metav1UpdateOptions); err != nil {
		t.Fatal(err)
	}
	f.waitFor(answers(""), "the old address passed on")
	if resp := f.query(ptrName(t, "10.2.0.6"), dns.TypePTR); passedOn(resp) {
		t.Fatalf("the new address is not answered:\n%s", resp)
	}

	if err := imports.Delete(t.Context(), "web", metav1DeleteOptions); err != nil {
		t.Fatal(err)
	}
	f.waitFor(func() bool { return passedOn(f.query(ptrName(t, "10.2.0.6"), dns.TypePTR)) }, "import deleted: passed on")
	if err := slices.Delete(t.Context(), moved.Name, metav1DeleteOptions); err != nil {
		t.Fatal(err)
	}
	f.waitFor(func() bool {
		f.m.idx.mu.RLock()
		defer f.m.idx.mu.RUnlock()
		return f.m.idx.addrs.len() == 0
	}, "the address index emptied")
}

// Before sync every reverse name goes on untouched: the next plugin's
// NXDOMAIN of an address stays NXDOMAIN.
func TestReverseBeforeSync(t *testing.T) {
	f := newUnstartedFixture(t, reverseConfig())
	f.m.Next = test.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeNameError)
		return dns.RcodeNameError, w.WriteMsg(m)
	})
	if resp := f.query(ptrName(t, "10.2.0.5"), dns.TypePTR); resp.Rcode != dns.RcodeNameError {
		t.Errorf("want the next plugin's NXDOMAIN, got\n%s", resp)
	}
}

// Without a reverse zone no address is indexed: the memory is spent only
// where PTR queries are answered.
func TestNoReverseZoneNoAddressIndex(t *testing.T) {
	f := newFixture(t, baseConfig(),
		importObj("demo", "web", nil, nil, headlessImport),
		importedSlice("demo", "web", "member2", "a", nil, ep{ip: "10.2.0.5", hostname: "web-0"}))
	f.m.idx.mu.RLock()
	defer f.m.idx.mu.RUnlock()
	if f.m.idx.addrs.len() != 0 || f.m.idx.views[svcKey{"demo", "web"}] == nil {
		t.Fatalf("want the import indexed and no address: %d addresses", f.m.idx.addrs.len())
	}
}

// An address a local object holds keeps its local name, whatever another
// cluster's imported slice claims: the next plugin's answer wins when it
// names a local object. Its name for an imported endpoint, under the
// derived Service, is no local object's: mcs answers those.
func TestReverseLocalWins(t *testing.T) {
	f := newFixture(t, reverseConfig(),
		importObj("demo", "web", nil, []portSpec{httpPort}, headlessImport),
		importedSlice("demo", "web", "member2", "a", nil, ep{ip: "10.1.0.5", hostname: "web-0"}, ep{ip: "10.2.0.5", hostname: "web-1"}),
	)
	local := map[string]string{
		ptrName(t, "10.1.0.5"): "web-0.web.demo.svc.cluster.local.",         // this cluster's pod
		ptrName(t, "10.2.0.5"): "web-1.derived-web.demo.svc.cluster.local.", // the imported copy
	}
	f.m.Next = test.HandlerFunc(func(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Answer = []dns.RR{test.PTR(r.Question[0].Name + " 30 IN PTR " + local[r.Question[0].Name])}
		return dns.RcodeSuccess, w.WriteMsg(m)
	})
	for ip, want := range map[string]string{
		"10.1.0.5": "web-0.web.demo.svc.cluster.local.",
		"10.2.0.5": "web-1.member2.web.demo.svc.clusterset.local.",
	} {
		resp := f.query(ptrName(t, ip), dns.TypePTR)
		if len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != want {
			t.Errorf("%s: %v, want %s", ip, resp.Answer, want)
		}
	}
}
