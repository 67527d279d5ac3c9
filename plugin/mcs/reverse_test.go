package mcs

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/forward"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/plugin/pkg/proxy"
	"github.com/coredns/coredns/plugin/pkg/transport"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
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
		// alone also when the address serves a ClusterSetIP import too: one
		// PTR per address, the specification's name for it.
		ptr("10.2.0.5", "web-0.member2.web.demo.svc.clusterset.local."),
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
// cluster's imported slice claims: the kubernetes plugin's name wins when
// it names a local object, alone. Its name for an imported endpoint, under
// the derived Service, is no local object's: mcs answers those. The next
// plugin is never asked.
func TestReverseLocalWins(t *testing.T) {
	imported := []*discoveryv1.EndpointSlice{
		importedSlice("demo", "web", "member2", "a", nil, ep{ip: "10.1.0.5", hostname: "web-0"}, ep{ip: "10.2.0.5", hostname: "web-1"}),
	}
	f := newFixture(t, reverseConfig(), importObj("demo", "web", nil, []portSpec{httpPort}, headlessImport), imported[0])
	k := kubernetes.New([]string{testZone, "in-addr.arpa."})
	k.APIConn = newSliceAPI(
		[]*corev1.Service{serviceObj("demo", "web", nil, httpPort), serviceObj("demo", api.DerivedPrefix+"web", nil, httpPort)},
		append(imported, localSlice("demo", "web", "local", nil, ep{ip: "10.1.0.5", hostname: "web-0"}), // this cluster's pod
			localSlice("demo", "web", "other", nil, ep{ip: "10.1.0.5", hostname: "web-9"})))
	f.m.kube = kubePeerOf([]plugin.Handler{k})
	asked := 0
	f.m.Next = test.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
		asked++
		return answerFromNext(ctx, w, r)
	})
	f.check([]test.Case{
		{Qname: ptrName(t, "10.1.0.5"), Qtype: dns.TypePTR, Authoritative: true, Answer: []dns.RR{
			test.PTR(ptrName(t, "10.1.0.5") + " 5 IN PTR web-0.web.demo.svc.cluster.local."),
		}},
		{Qname: ptrName(t, "10.2.0.5"), Qtype: dns.TypePTR, Authoritative: true, Answer: []dns.RR{
			test.PTR(ptrName(t, "10.2.0.5") + " 30 IN PTR web-1.member2.web.demo.svc.clusterset.local."),
		}},
	})
	if asked != 0 {
		t.Errorf("the next plugin was asked %d times", asked)
	}
}

// The shipped Corefile's chain: kubernetes with fallthrough in-addr.arpa,
// then forward to an upstream that has a PTR record for every address (as
// a cloud's resolver names its VPC's: ip-10-2-0-5.ec2.internal). mcs asks
// the kubernetes plugin alone: an imported endpoint's address answers its
// clusterset name, one PTR, and the upstream is never asked; an address no
// import holds goes on through the chain to the upstream as before.
func TestReversePTRNotUpstream(t *testing.T) {
	f := newFixture(t, reverseConfig(),
		importObj("demo", "web", nil, []portSpec{httpPort}, headlessImport),
		importedSlice("demo", "web", "member2", "a", nil, ep{ip: "10.2.0.5", hostname: "web-0"}))
	var upstreamPTR atomic.Int32
	upstream := dnstest.NewServer(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		if r.Question[0].Qtype == dns.TypePTR {
			upstreamPTR.Add(1)
			ip := dnsutil.ExtractAddressFromReverse(r.Question[0].Name)
			m.Answer = []dns.RR{test.PTR(r.Question[0].Name + " 60 IN PTR ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal.")}
		}
		_ = w.WriteMsg(m)
	})
	defer upstream.Close()
	fwd := forward.New()
	fwd.SetProxy(proxy.NewProxy("forward", upstream.Addr, transport.DNS))
	defer func() { _ = fwd.OnShutdown() }()
	k := kubernetes.New([]string{testZone, "in-addr.arpa."})
	k.APIConn = newSliceAPI(nil, nil) // the member Corefile's labels line: no imported slice
	k.Fall.SetZonesFromArgs([]string{"in-addr.arpa."})
	k.Next = fwd
	f.m.Next, f.m.kube = k, kubePeerOf([]plugin.Handler{k})

	f.check([]test.Case{{Qname: ptrName(t, "10.2.0.5"), Qtype: dns.TypePTR, Authoritative: true, Answer: []dns.RR{
		test.PTR(ptrName(t, "10.2.0.5") + " 30 IN PTR web-0.member2.web.demo.svc.clusterset.local."),
	}}})
	if n := upstreamPTR.Load(); n != 0 {
		t.Errorf("the upstream was asked %d times for an imported address", n)
	}
	if resp := f.query(ptrName(t, "10.9.9.9"), dns.TypePTR); len(resp.Answer) != 1 || resp.Answer[0].(*dns.PTR).Ptr != "ip-10-9-9-9.ec2.internal." || upstreamPTR.Load() != 1 {
		t.Errorf("an address no import holds: want the upstream's answer, asked once; asked %d times, got\n%s", upstreamPTR.Load(), resp)
	}
}
