package mcs

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/metrics"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/coredns-mcs/coredns-mcs/api"
)

const (
	vipLocal  = "10.96.1.1"
	vipSet    = "10.96.9.9"
	localIP   = "10.1.0.1"
	remoteIP  = "10.2.0.1"
	remote3IP = "10.3.0.1"
	serveName = "serve.demo.svc.cluster.local."
)

// scenario builds the objects of one row of the decision table for the
// service demo/serve: this cluster is member1, remote endpoints are member2's.
type scenario struct {
	strategy string // annotation on the import; "" for none
	headless bool
	localSvc bool // a Service demo/serve exists in this cluster
	setVIP   bool // the ServiceImport has spec.ips
	local    []ep
	remote   []ep
}

func (s scenario) objects() []runtime.Object {
	objs := []runtime.Object{namespaceObj("demo")}
	var opts []importOpt
	if s.strategy != "" {
		opts = append(opts, withStrategy(s.strategy))
	}
	if s.headless {
		opts = append(opts, headlessImport)
	}
	var ips []string
	if s.setVIP && !s.headless {
		ips = []string{vipSet}
	}
	objs = append(objs, importObj("demo", "serve", ips, []portSpec{httpPort}, opts...))
	if s.localSvc {
		var local []string
		if !s.headless {
			local = []string{vipLocal}
		}
		objs = append(objs, serviceObj("demo", "serve", local, httpPort))
	}
	// The pods listen on the service's port, where pod addresses are
	// right (TestPodAddressesOnlyOnTheServicePorts has the other case).
	if s.local != nil {
		objs = append(objs, localSlice("demo", "serve", "serve-abc", []portSpec{httpPort}, s.local...))
	}
	if s.remote != nil {
		objs = append(objs, importedSlice("demo", "serve", "member2", "serve-xyz", []portSpec{httpPort}, s.remote...))
	}
	return objs
}

var (
	readyLocal    = []ep{{ip: localIP}}
	notReadyLocal = []ep{{ip: localIP, notReady: true}}
	readyRemote   = []ep{{ip: remoteIP}}
	notReadyRem   = []ep{{ip: remoteIP, notReady: true}}
)

// TestDecisionTable walks every cell of the README's decision table for an A query of
// the native name. want nil means mcs passes the query to the next plugin.
func TestDecisionTable(t *testing.T) {
	lf, ral := string(api.LocalFirst), string(api.RemoteAndLocal)
	rows := []struct {
		name     string
		answer   answerMode
		sc       scenario
		want     []string
		outcome  outcome
		fellBack bool
	}{
		{"LocalFirst vip: L → VIP_local", answerVIP, scenario{strategy: lf, localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}, []string{vipLocal}, outcomeLocal, false},
		{"LocalFirst vip: L, no local VIP → L", answerVIP, scenario{strategy: lf, setVIP: true, local: readyLocal, remote: readyRemote}, []string{localIP}, outcomeLocal, false},
		{"LocalFirst vip: L not ready, R → VIP_set", answerVIP, scenario{strategy: lf, localSvc: true, setVIP: true, local: notReadyLocal, remote: readyRemote}, []string{vipSet}, outcomeRemote, true},
		{"LocalFirst vip: no L slice, R → VIP_set", answerVIP, scenario{strategy: lf, localSvc: true, setVIP: true, remote: readyRemote}, []string{vipSet}, outcomeRemote, true},
		{"LocalFirst vip: R, no VIP_set → R", answerVIP, scenario{strategy: lf, localSvc: true, local: notReadyLocal, remote: readyRemote}, []string{remoteIP}, outcomeRemote, true},
		{"LocalFirst vip: both empty → VIP_local", answerVIP, scenario{strategy: lf, localSvc: true, setVIP: true, local: notReadyLocal, remote: notReadyRem}, []string{vipLocal}, outcomeLocal, false},
		{"LocalFirst vip: both empty, no Service → VIP_set", answerVIP, scenario{strategy: lf, setVIP: true, remote: notReadyRem}, []string{vipSet}, outcomeRemote, false},
		{"LocalFirst vip: both empty, no VIP → next", answerVIP, scenario{strategy: lf}, nil, "", false},
		{"LocalFirst endpoints: L → L", answerEndpoints, scenario{strategy: lf, localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}, []string{localIP}, outcomeLocal, false},
		{"LocalFirst endpoints: R → R", answerEndpoints, scenario{strategy: lf, localSvc: true, setVIP: true, local: notReadyLocal, remote: readyRemote}, []string{remoteIP}, outcomeRemote, true},
		{"LocalFirst endpoints: both empty → next", answerEndpoints, scenario{strategy: lf, localSvc: true, setVIP: true, local: notReadyLocal, remote: notReadyRem}, nil, "", false},
		{"LocalFirst headless: L → L", answerVIP, scenario{strategy: lf, headless: true, localSvc: true, local: readyLocal, remote: readyRemote}, []string{localIP}, outcomeLocal, false},
		{"LocalFirst headless: R → R", answerVIP, scenario{strategy: lf, headless: true, localSvc: true, remote: readyRemote}, []string{remoteIP}, outcomeRemote, true},
		{"LocalFirst headless: both empty → next", answerVIP, scenario{strategy: lf, headless: true, localSvc: true, local: notReadyLocal}, nil, "", false},
		{"RemoteAndLocal vip → VIP_set", answerVIP, scenario{strategy: ral, localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}, []string{vipSet}, outcomeCombined, false},
		{"RemoteAndLocal vip: nothing ready → VIP_set", answerVIP, scenario{strategy: ral, localSvc: true, setVIP: true, local: notReadyLocal, remote: notReadyRem}, []string{vipSet}, outcomeCombined, false},
		{"RemoteAndLocal vip: no VIP_set → L ∪ R", answerVIP, scenario{strategy: ral, localSvc: true, local: readyLocal, remote: readyRemote}, []string{localIP, remoteIP}, outcomeCombined, false},
		{"RemoteAndLocal vip: no VIP_set, nothing ready → next", answerVIP, scenario{strategy: ral, localSvc: true, local: notReadyLocal, remote: notReadyRem}, nil, "", false},
		{"RemoteAndLocal endpoints → L ∪ R", answerEndpoints, scenario{strategy: ral, localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}, []string{localIP, remoteIP}, outcomeCombined, false},
		{"RemoteAndLocal endpoints: R only → R", answerEndpoints, scenario{strategy: ral, localSvc: true, setVIP: true, local: notReadyLocal, remote: readyRemote}, []string{remoteIP}, outcomeCombined, false},
		{"RemoteAndLocal endpoints: empty → next", answerEndpoints, scenario{strategy: ral, localSvc: true, setVIP: true}, nil, "", false},
		{"RemoteAndLocal headless → L ∪ R", answerVIP, scenario{strategy: ral, headless: true, localSvc: true, local: readyLocal, remote: readyRemote}, []string{localIP, remoteIP}, outcomeCombined, false},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.answer = row.answer
			f := newFixture(t, cfg, row.sc.objects()...)
			before := testutil.ToFloat64(localFallbacks)
			counted := requestsTotal.WithLabelValues("", testZone, row.sc.strategy, string(row.outcome))
			n := testutil.ToFloat64(counted)
			resp := f.query(serveName, dns.TypeA)
			if row.want == nil {
				if !passedOn(resp) {
					t.Fatalf("want the query passed on, got\n%s", resp)
				}
				return
			}
			if got := addresses(resp); !slices.Equal(got, row.want) || !resp.Authoritative || resp.Rcode != dns.RcodeSuccess {
				t.Fatalf("want aa NOERROR %v, got %v\n%s", row.want, got, resp)
			}
			if got := testutil.ToFloat64(counted) - n; got != 1 {
				t.Errorf("outcome %s counted %v times", row.outcome, got)
			}
			if fell := testutil.ToFloat64(localFallbacks) - before; fell != map[bool]float64{true: 1}[row.fellBack] {
				t.Errorf("fallbacks moved by %v, want fellBack=%v", fell, row.fellBack)
			}
		})
	}
}

// addresses lists the A/AAAA answers, sorted.
func addresses(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch a := rr.(type) {
		case *dns.A:
			out = append(out, a.A.String())
		case *dns.AAAA:
			out = append(out, a.AAAA.String())
		}
	}
	slices.Sort(out)
	return out
}

func TestStaleClusters(t *testing.T) {
	expired, fresh := time.Now().Add(-time.Hour), time.Now()
	tests := []struct {
		name     string
		strategy api.Strategy
		local    []ep
		want     []string
	}{
		{"RemoteAndLocal leaves stale out", api.RemoteAndLocal, readyLocal, []string{localIP, remote3IP}},
		{"LocalFirst falls back to fresh remote only", api.LocalFirst, notReadyLocal, []string{remote3IP}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.answer = answerEndpoints
			f := newFixture(t, cfg,
				importObj("demo", "serve", nil, nil, withStrategy(string(tc.strategy))),
				localSlice("demo", "serve", "a", nil, tc.local...),
				importedSlice("demo", "serve", "member2", "b", nil, readyRemote...),
				importedSlice("demo", "serve", "member3", "c", nil, ep{ip: remote3IP}),
				leaseObj("member2", expired, 30), leaseObj("member3", fresh, 30))
			if got := addresses(f.query(serveName, dns.TypeA)); !slices.Equal(got, tc.want) {
				t.Fatalf("want %v, got %v", tc.want, got)
			}
		})
	}
}

// A stale cluster is used only when nothing else is left, and ready local
// endpoints are something: under RemoteAndLocal with every provider stale,
// L answers alone.
func TestStaleClustersAllStale(t *testing.T) {
	cfg := baseConfig()
	cfg.answer = answerEndpoints
	f := newFixture(t, cfg,
		importObj("demo", "serve", nil, nil, withStrategy(string(api.RemoteAndLocal))),
		localSlice("demo", "serve", "a", nil, readyLocal...),
		importedSlice("demo", "serve", "member2", "b", nil, readyRemote...),
		leaseObj("member2", time.Now().Add(-time.Hour), 30))
	if got := addresses(f.query(serveName, dns.TypeA)); !slices.Equal(got, []string{localIP}) {
		t.Fatalf("want L alone, got %v", got)
	}
}

func TestStaleUsedWhenNothingElse(t *testing.T) {
	cfg := baseConfig()
	cfg.answer = answerEndpoints
	f := newFixture(t, cfg,
		importObj("demo", "serve", nil, nil, withStrategy(string(api.RemoteAndLocal))),
		localSlice("demo", "serve", "a", nil, notReadyLocal...),
		importedSlice("demo", "serve", "member2", "b", nil, readyRemote...),
		leaseObj("member2", time.Now().Add(-time.Hour), 30))
	if got := addresses(f.query(serveName, dns.TypeA)); !slices.Equal(got, []string{remoteIP}) {
		t.Fatalf("want the stale cluster's endpoints, got %v", got)
	}
	// Expiry is a matter of the clock: a renewal makes member2 fresh again.
	if !f.m.idx.stale("member2", time.Now()) {
		t.Fatal("member2 should be stale")
	}
	f.waitFor(func() bool { return testutil.ToFloat64(staleClusters) == 1 }, "the stale_clusters gauge")
	if _, err := f.kube.CoordinationV1().Leases(api.LeaseNamespace).Update(t.Context(), leaseObj("member2", time.Now(), 30), metav1UpdateOptions); err != nil {
		t.Fatal(err)
	}
	f.waitFor(func() bool { return !f.m.idx.stale("member2", time.Now()) }, "member2 renewed")
	f.waitFor(func() bool { return testutil.ToFloat64(staleClusters) == 0 }, "the stale_clusters gauge back to 0")
}

// This cluster's own slices come back imported when it is also a provision
// cluster; they are not R: L already holds them.
func TestOwnImportedSlicesAreNotRemote(t *testing.T) {
	cfg := baseConfig()
	cfg.answer = answerEndpoints
	f := newFixture(t, cfg,
		importObj("demo", "serve", nil, nil, withStrategy(string(api.LocalFirst))),
		localSlice("demo", "serve", "a", nil, notReadyLocal...),
		importedSlice("demo", "serve", self, "a", nil, ep{ip: "10.1.0.99"}),
		importedSlice("demo", "serve", "member2", "b", nil, readyRemote...))
	if got := addresses(f.query(serveName, dns.TypeA)); !slices.Equal(got, []string{remoteIP}) {
		t.Fatalf("want member2 only, got %v", got)
	}
}

func TestWhichServicesAreNative(t *testing.T) {
	tests := []struct {
		name   string
		option api.Strategy
		objs   []runtime.Object
		native bool
	}{
		{"no import", api.LocalFirst, []runtime.Object{serviceObj("demo", "serve", []string{vipLocal}, httpPort)}, false},
		{"import without annotation", "", []runtime.Object{importObj("demo", "serve", []string{vipSet}, nil)}, false},
		{"import under the strategy option", api.RemoteAndLocal, []runtime.Object{importObj("demo", "serve", []string{vipSet}, nil)}, true},
		{"annotated import", "", []runtime.Object{importObj("demo", "serve", []string{vipSet}, nil, withStrategy("RemoteAndLocal"))}, true},
		{"annotation that is no strategy", "", []runtime.Object{importObj("demo", "serve", []string{vipSet}, nil, withStrategy("Nearest"))}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.strategy = tc.option
			f := newFixture(t, cfg, tc.objs...)
			if got := !passedOn(f.query(serveName, dns.TypeA)); got != tc.native {
				t.Fatalf("answered by mcs: %v, want %v", got, tc.native)
			}
		})
	}
}

func TestAnnotationOverridesOption(t *testing.T) {
	cfg := baseConfig()
	cfg.strategy = api.RemoteAndLocal
	f := newFixture(t, cfg, scenario{strategy: string(api.LocalFirst), localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}.objects()...)
	if got := addresses(f.query(serveName, dns.TypeA)); !slices.Equal(got, []string{vipLocal}) {
		t.Fatalf("LocalFirst from the annotation wants VIP_local, got %v", got)
	}
}

// TestNativeRecords checks whole messages: record types, SRV and its
// additional section, NODATA with SOA, the aa flag and TTLs.
func TestNativeRecords(t *testing.T) {
	cfg := baseConfig()
	cfg.ttl = 30
	f := newFixture(t, cfg,
		namespaceObj("demo"),
		importObj("demo", "serve", []string{vipSet, "fd00::9"}, []portSpec{httpPort, dnsPort}, withStrategy("RemoteAndLocal")),
		importObj("demo", "v4only", []string{vipSet}, []portSpec{httpPort}, withStrategy("RemoteAndLocal")),
		importObj("demo", "web", nil, []portSpec{httpPort}, withStrategy("LocalFirst"), headlessImport),
		localSlice("demo", "web", "web-a", []portSpec{{"http", "TCP", 8080}}, ep{ip: "10.1.0.5", hostname: "web-0"}),
		importedSlice("demo", "web", "member2", "web-b", []portSpec{{"http", "TCP", 8080}}, ep{ip: "10.2.0.5", hostname: "web-0"}, ep{ip: "10.2.0.6", hostname: "web-1"}),
	)
	soaRR := test.SOA("cluster.local. 30 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30")
	f.check([]test.Case{
		{Qname: serveName, Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("serve.demo.svc.cluster.local. 30 IN A 10.96.9.9")}},
		{Qname: serveName, Qtype: dns.TypeAAAA, Authoritative: true, Answer: []dns.RR{test.AAAA("serve.demo.svc.cluster.local. 30 IN AAAA fd00::9")}},
		{Qname: "v4only.demo.svc.cluster.local.", Qtype: dns.TypeAAAA, Authoritative: true, Ns: []dns.RR{soaRR}},
		{Qname: serveName, Qtype: dns.TypeTXT, Authoritative: true, Ns: []dns.RR{soaRR}},
		{Qname: serveName, Qtype: dns.TypeSRV, Authoritative: true,
			Answer: []dns.RR{
				test.SRV("serve.demo.svc.cluster.local. 30 IN SRV 0 50 53 serve.demo.svc.cluster.local."),
				test.SRV("serve.demo.svc.cluster.local. 30 IN SRV 0 50 80 serve.demo.svc.cluster.local."),
			},
			Extra: []dns.RR{
				test.A("serve.demo.svc.cluster.local. 30 IN A 10.96.9.9"),
				test.AAAA("serve.demo.svc.cluster.local. 30 IN AAAA fd00::9"),
			}},
		{Qname: "_dns._udp.serve.demo.svc.cluster.local.", Qtype: dns.TypeSRV, Authoritative: true,
			Answer: []dns.RR{test.SRV("_dns._udp.serve.demo.svc.cluster.local. 30 IN SRV 0 100 53 serve.demo.svc.cluster.local.")},
			Extra: []dns.RR{
				test.A("serve.demo.svc.cluster.local. 30 IN A 10.96.9.9"),
				test.AAAA("serve.demo.svc.cluster.local. 30 IN AAAA fd00::9"),
			}},
		{Qname: "_http._tcp.serve.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Ns: []dns.RR{soaRR}},
		// Headless LocalFirst: the local web-0 wins, web-1 exists only remotely.
		{Qname: "web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("web.demo.svc.cluster.local. 30 IN A 10.1.0.5")}},
		{Qname: "web-0.web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("web-0.web.demo.svc.cluster.local. 30 IN A 10.1.0.5")}},
		{Qname: "web-1.web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{test.A("web-1.web.demo.svc.cluster.local. 30 IN A 10.2.0.6")}},
		{Qname: "web-1.web.demo.svc.cluster.local.", Qtype: dns.TypeAAAA, Authoritative: true, Ns: []dns.RR{soaRR}},
		{Qname: "_http._tcp.web.demo.svc.cluster.local.", Qtype: dns.TypeSRV, Authoritative: true,
			Answer: []dns.RR{test.SRV("_http._tcp.web.demo.svc.cluster.local. 30 IN SRV 0 100 8080 web-0.web.demo.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("web-0.web.demo.svc.cluster.local. 30 IN A 10.1.0.5")}},
		{Qname: "web-1.web.demo.svc.cluster.local.", Qtype: dns.TypeSRV, Authoritative: true,
			Answer: []dns.RR{test.SRV("web-1.web.demo.svc.cluster.local. 30 IN SRV 0 100 8080 web-1.web.demo.svc.cluster.local.")},
			Extra:  []dns.RR{test.A("web-1.web.demo.svc.cluster.local. 30 IN A 10.2.0.6")}},
	})
	for _, name := range []string{
		"_grpc._tcp.serve.demo.svc.cluster.local.", // no such port
		"web-2.web.demo.svc.cluster.local.",        // no such endpoint
		"other.demo.svc.cluster.local.",            // no such service
		"demo.svc.cluster.local.",                  // not a service name
		"1-2-3-4.demo.pod.cluster.local.",
		"cluster.local.",
		"a.b.c.serve.demo.svc.cluster.local.",
	} {
		if resp := f.query(name, dns.TypeSRV); !passedOn(resp) {
			t.Errorf("%s: want passed on, got\n%s", name, resp)
		}
	}
}

// A local pod's own name is never answered by another cluster's pod of
// that name, whatever the strategy and the import's minimum: a member
// could otherwise take a local pod's name (web-0 of a StatefulSet) and
// receive its traffic. A name only another cluster has resolves there.
func TestPerEndpointLocalShadowsRemote(t *testing.T) {
	for _, opts := range [][]importOpt{
		{withStrategy("RemoteAndLocal"), headlessImport},
		{withStrategy("LocalFirst"), headlessImport, withMinReady("3")},
	} {
		f := newFixture(t, baseConfig(),
			importObj("demo", "web", nil, nil, opts...),
			localSlice("demo", "web", "web-a", nil, ep{ip: "10.1.0.5", hostname: "web-0"}),
			importedSlice("demo", "web", "member2", "web-b", nil, ep{ip: "10.2.0.5", hostname: "web-0"}, ep{ip: "10.2.0.6", hostname: "web-1"}))
		if got := addresses(f.query("web-0.web.demo.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{"10.1.0.5"}) {
			t.Errorf("want the local web-0 alone, got %v", got)
		}
		if got := addresses(f.query("web-1.web.demo.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{"10.2.0.6"}) {
			t.Errorf("want member2's web-1, got %v", got)
		}
	}
	// Nor is the remote web-0 SRV glue under the local one's name.
	f := newFixture(t, baseConfig(),
		importObj("demo", "web", nil, []portSpec{httpPort}, withStrategy("RemoteAndLocal"), headlessImport),
		localSlice("demo", "web", "web-a", []portSpec{httpPort}, ep{ip: "10.1.0.5", hostname: "web-0"}),
		importedSlice("demo", "web", "member2", "web-b", []portSpec{httpPort}, ep{ip: "10.2.0.5", hostname: "web-0"}, ep{ip: "10.2.0.6", hostname: "web-1"}))
	f.check([]test.Case{{Qname: "_http._tcp.web.demo.svc.cluster.local.", Qtype: dns.TypeSRV, Authoritative: true, Answer: []dns.RR{
		test.SRV("_http._tcp.web.demo.svc.cluster.local. 5 IN SRV 0 50 80 web-0.web.demo.svc.cluster.local."),
		test.SRV("_http._tcp.web.demo.svc.cluster.local. 5 IN SRV 0 50 80 web-1.web.demo.svc.cluster.local."),
	}, Extra: []dns.RR{
		test.A("web-0.web.demo.svc.cluster.local. 5 IN A 10.1.0.5"),
		test.A("web-1.web.demo.svc.cluster.local. 5 IN A 10.2.0.6"),
	}}})
	f = newFixture(t, baseConfig(),
		importObj("demo", "web", nil, nil, withStrategy("RemoteAndLocal"), headlessImport),
		localSlice("demo", "web", "web-a", nil, ep{ip: "10.1.0.5", hostname: "web-0"}),
		importedSlice("demo", "web", "member2", "web-b", nil, ep{ip: "10.2.0.5", hostname: "web-0"}))
	if got := addresses(f.query("10-2-0-5.web.demo.svc.cluster.local.", dns.TypeA)); got != nil {
		t.Fatalf("an endpoint with a hostname is not named by its address, got %v", got)
	}
}

// An endpoint name of a ClusterIP service answers that endpoint, not a VIP,
// and a name no endpoint has goes to the next plugin.
func TestPerEndpointClusterIP(t *testing.T) {
	// The service name answers the VIP its strategy picks: RemoteAndLocal
	// VIP_set, LocalFirst with a ready local endpoint VIP_local.
	for strategy, vip := range map[string]string{string(api.RemoteAndLocal): "10.99.0.20", string(api.LocalFirst): "10.96.0.20"} {
		f := newFixture(t, baseConfig(),
			serviceObj("demo", "api", []string{"10.96.0.20"}),
			importObj("demo", "api", []string{"10.99.0.20"}, nil, withStrategy(strategy)),
			localSlice("demo", "api", "api-a", nil, ep{ip: "10.1.0.20", hostname: "api-0"}),
			importedSlice("demo", "api", "member2", "api-b", nil, ep{ip: "10.2.0.21", hostname: "api-1"}))
		if got := addresses(f.query("api.demo.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{vip}) {
			t.Fatalf("%s: the service name must answer %s, got %v", strategy, vip, got)
		}
		if got := addresses(f.query("api-0.api.demo.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{"10.1.0.20"}) {
			t.Errorf("%s: want the local api-0, not a VIP, got %v", strategy, got)
		}
		if got := addresses(f.query("api-1.api.demo.svc.cluster.local.", dns.TypeA)); !slices.Equal(got, []string{"10.2.0.21"}) {
			t.Errorf("%s: want the remote api-1, got %v", strategy, got)
		}
		if resp := f.query("api-9.api.demo.svc.cluster.local.", dns.TypeA); !passedOn(resp) {
			t.Errorf("%s: an unknown endpoint name must be passed on, got\n%s", strategy, resp)
		}
	}
}

func TestNativeKeepsQueryCase(t *testing.T) {
	f := newFixture(t, baseConfig(), scenario{strategy: "RemoteAndLocal", localSvc: true, setVIP: true, local: readyLocal}.objects()...)
	resp := f.query("Serve.Demo.svc.Cluster.Local.", dns.TypeA)
	if len(resp.Answer) != 1 || resp.Answer[0].Header().Name != "Serve.Demo.svc.Cluster.Local." {
		t.Fatalf("want the owner spelled as asked, got\n%s", resp)
	}
}

// TestPassedOnUntouched: a name mcs does not answer reaches the next plugin
// with the request unchanged, so its answer is exactly what it would be alone.
func TestPassedOnUntouched(t *testing.T) {
	f := newFixture(t, baseConfig(), serviceObj("demo", "plain", []string{vipLocal}, httpPort))
	r := new(dns.Msg)
	r.SetQuestion("plain.demo.svc.cluster.local.", dns.TypeA)
	r.SetEdns0(1232, true)
	before, _ := r.Pack()
	var seen *dns.Msg
	f.m.Next = test.HandlerFunc(func(ctx context.Context, w dns.ResponseWriter, q *dns.Msg) (int, error) {
		seen = q
		return answerFromNext(ctx, w, q)
	})
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := f.m.ServeDNS(context.Background(), rec, r); err != nil {
		t.Fatal(err)
	}
	after, _ := seen.Pack()
	if seen != r || !bytes.Equal(before, after) || !passedOn(rec.Msg) {
		t.Fatal("the next plugin did not get the request untouched")
	}
}

// TestAnswerFollowsChanges: LocalFirst fails over to the remote VIP within
// one informer event of the local slice going not ready, and back.
func TestAnswerFollowsChanges(t *testing.T) {
	f := newFixture(t, baseConfig(), scenario{strategy: "LocalFirst", localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}.objects()...)
	answer := func() []string { return addresses(f.query(serveName, dns.TypeA)) }
	if got := answer(); !slices.Equal(got, []string{vipLocal}) {
		t.Fatalf("start: %v", got)
	}
	slices := f.kube.DiscoveryV1().EndpointSlices("demo")
	update := func(eps ...ep) {
		t.Helper()
		s := localSlice("demo", "serve", "serve-abc", []portSpec{{"http", "TCP", 8080}}, eps...)
		if _, err := slices.Update(t.Context(), s, metav1UpdateOptions); err != nil {
			t.Fatal(err)
		}
	}
	update(notReadyLocal...)
	f.waitFor(func() bool { return equal(answer(), vipSet) }, "failover to VIP_set")
	update(readyLocal...)
	f.waitFor(func() bool { return equal(answer(), vipLocal) }, "back to VIP_local")
	if err := f.mc.MulticlusterV1beta1().ServiceImports("demo").Delete(t.Context(), "serve", metav1DeleteOptions); err != nil {
		t.Fatal(err)
	}
	f.waitFor(func() bool { return passedOn(f.query(serveName, dns.TypeA)) }, "import deleted: passed on")
}

func equal(got []string, want ...string) bool { return slices.Equal(got, want) }

// TestBeforeSync: until mcs has synced, native names go to the next plugin,
// and only its NXDOMAIN becomes SERVFAIL (the name may be an import mcs
// does not know yet); clusterset names that need the API get SERVFAIL.
func TestBeforeSync(t *testing.T) {
	f := newUnstartedFixture(t, baseConfig(), scenario{strategy: "LocalFirst", localSvc: true, setVIP: true, local: readyLocal}.objects()...)
	f.m.Next = test.HandlerFunc(kubernetesLike)
	if f.m.Ready() {
		t.Fatal("ready before start")
	}
	servfails := requestsTotal.WithLabelValues("", testZone, strategyNone, string(outcomeServfail))
	before := testutil.ToFloat64(servfails)
	for _, name := range []string{serveName, "x.serve.demo.svc.cluster.local.", "_http._tcp.serve.demo.svc.cluster.local.", "demo.svc.cluster.local."} {
		if resp := f.query(name, dns.TypeA); !passedOn(resp) {
			t.Errorf("%s: want the next plugin's answer before sync, got\n%s", name, resp)
		}
	}
	if got := testutil.ToFloat64(servfails) - before; got != 0 {
		t.Errorf("%v SERVFAIL counted for names the next plugin answered", got)
	}
	for _, name := range []string{"missing.demo.svc.cluster.local.", "x.missing.demo.svc.cluster.local.", "serve.demo.svc.clusterset.local.", "demo.svc.clusterset.local."} {
		if resp := f.query(name, dns.TypeA); resp.Rcode != dns.RcodeServerFailure || len(resp.Answer)+len(resp.Ns) != 0 {
			t.Errorf("%s: want an empty SERVFAIL before sync, got\n%s", name, resp)
		}
	}
	if got := testutil.ToFloat64(servfails) - before; got != 2 {
		t.Errorf("%v SERVFAIL counted in cluster.local, want 2", got)
	}
	// A name that cannot be an import keeps the next plugin's NXDOMAIN.
	if resp := f.query("missing.svc.cluster.local.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Errorf("a namespace name: want the next plugin's NXDOMAIN, got\n%s", resp)
	}
	if resp := f.query("dns-version.clusterset.local.", dns.TypeTXT); len(resp.Answer) != 1 {
		t.Errorf("dns-version needs no state, got\n%s", resp)
	}
}

// kubernetesLike is a next plugin that denies names holding "missing" and
// answers the others with the marker.
func kubernetesLike(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if !strings.Contains(r.Question[0].Name, "missing") {
		return answerFromNext(ctx, w, r)
	}
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeNameError)
	m.Ns = []dns.RR{soa(testZone, 5, 1)}
	return dns.RcodeSuccess, w.WriteMsg(m)
}

// A metrics recorder right above mcs learns which plugin answered a name
// mcs passed on, as plugin.NextOrFailure tells it.
func TestPassedOnToldToRecorder(t *testing.T) {
	f := newFixture(t, baseConfig())
	r := new(dns.Msg)
	r.SetQuestion("plain.demo.svc.cluster.local.", dns.TypeA)
	rec := metrics.NewRecorder(&test.ResponseWriter{})
	if _, err := f.m.ServeDNS(context.Background(), rec, r); err != nil {
		t.Fatal(err)
	}
	if !passedOn(rec.Msg) || rec.Plugin != f.m.Next.Name() {
		t.Fatalf("recorded plugin %q, answer\n%s", rec.Plugin, rec.Msg)
	}
}

// RFC 8020: _<proto>.<svc>.<ns>.svc.cluster.local of a service mcs answers
// has no records but SRV names below it when a named port of the chosen
// set speaks the protocol: it is NODATA, never the next plugin's NXDOMAIN,
// which resolvers would take to deny the names below it too.
func TestNativeProtoExists(t *testing.T) {
	f := newFixture(t, baseConfig(),
		namespaceObj("demo"),
		importObj("demo", "serve", []string{vipSet}, []portSpec{httpPort, dnsPort}, withStrategy("RemoteAndLocal")),
		importObj("demo", "web", nil, []portSpec{httpPort}, withStrategy("RemoteAndLocal"), headlessImport),
		importedSlice("demo", "web", "member2", "a", []portSpec{httpPort}, ep{ip: "10.2.0.5"}),
	)
	soa := test.SOA("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5")
	var cases []test.Case
	for _, name := range []string{"_tcp.serve.demo.svc.cluster.local.", "_udp.serve.demo.svc.cluster.local.", "_tcp.web.demo.svc.cluster.local."} {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeSRV} {
			cases = append(cases, test.Case{Qname: name, Qtype: qtype, Authoritative: true, Ns: []dns.RR{soa}})
		}
	}
	f.check(cases)
	for _, name := range []string{"_sctp.serve.demo.svc.cluster.local.", "_udp.web.demo.svc.cluster.local.", "_tcp.other.demo.svc.cluster.local."} {
		if resp := f.query(name, dns.TypeA); !passedOn(resp) {
			t.Errorf("%s: no SRV name below it: want passed on, got\n%s", name, resp)
		}
	}
	if resp := f.query("_http._tcp.serve.demo.svc.cluster.local.", dns.TypeSRV); len(resp.Answer) != 1 {
		t.Errorf("the SRV name below: want one record, got\n%s", resp)
	}
}

// A pod address answers a ClusterIP service's name only where its pods
// listen on the service's ports: a client connects to the address on the
// service's port, and only kube-proxy's VIP translates port to targetPort.
// Where a ready endpoint's port is another number, `answer endpoints`
// answers the VIP column instead, and `answer vip` while the import has no
// IPs yet leaves the name to the next plugin. A pod's own name still
// answers its address.
func TestPodAddressesOnlyOnTheServicePorts(t *testing.T) {
	const webName = "web.demo.svc.cluster.local."
	target := portSpec{"http", "TCP", 8080}
	world := func(ips []string, slicePort portSpec) []runtime.Object {
		return []runtime.Object{
			namespaceObj("demo"),
			serviceObj("demo", "web", []string{vipLocal}, httpPort),
			importObj("demo", "web", ips, []portSpec{httpPort}, withStrategy("RemoteAndLocal")),
			localSlice("demo", "web", "local", []portSpec{slicePort}, ep{ip: "10.1.0.5", hostname: "web-0"}),
			importedSlice("demo", "web", "member2", "a", []portSpec{slicePort}, ep{ip: "10.2.0.5"}),
		}
	}
	endpoints := baseConfig()
	endpoints.answer = answerEndpoints
	a := func(name, ip string) dns.RR { return test.A(name + " 5 IN A " + ip) }
	for _, c := range []struct {
		name string
		cfg  *config
		objs []runtime.Object
		want []dns.RR // nil: passed on
	}{
		{"answer endpoints, pods on the service's port: pod addresses", endpoints, world([]string{vipSet}, httpPort),
			[]dns.RR{a(webName, "10.1.0.5"), a(webName, "10.2.0.5")}},
		{"answer endpoints, pods on another port: the VIP", endpoints, world([]string{vipSet}, target),
			[]dns.RR{a(webName, vipSet)}},
		{"answer vip, no clusterset VIP yet, pods on the service's port: pod addresses", baseConfig(), world(nil, httpPort),
			[]dns.RR{a(webName, "10.1.0.5"), a(webName, "10.2.0.5")}},
		{"answer vip, no clusterset VIP yet, pods on another port: the next plugin", baseConfig(), world(nil, target), nil},
		// Only ready endpoints are answered, so only their ports count.
		{"answer endpoints, only unready pods on another port: pod addresses", endpoints,
			append(world([]string{vipSet}, httpPort), importedSlice("demo", "web", "member3", "b", []portSpec{target}, ep{ip: "10.3.0.5", notReady: true})),
			[]dns.RR{a(webName, "10.1.0.5"), a(webName, "10.2.0.5")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.cfg, c.objs...)
			resp := f.query(webName, dns.TypeA)
			if c.want == nil {
				if !passedOn(resp) {
					t.Errorf("want passed on, got\n%s", resp)
				}
				return
			}
			if err := test.SortAndCheck(resp, test.Case{Qname: webName, Qtype: dns.TypeA, Authoritative: true, Answer: c.want}); err != nil {
				t.Errorf("%v\n%s", err, resp)
			}
			pod := "web-0." + webName
			if err := test.SortAndCheck(f.query(pod, dns.TypeA), test.Case{Qname: pod, Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{a(pod, "10.1.0.5")}}); err != nil {
				t.Errorf("the pod's own name: %v", err)
			}
		})
	}
}

// With the kubernetes plugin's zonal option, a headless service's zonal
// names (<zone>.pin|prefer._zone.<svc>…) answer the endpoints its name
// answers that are in that zone, as the kubernetes plugin answers its
// own: prefer falls back to every one of them, pin is NODATA. Its
// ClusterIP services' are its NXDOMAIN, and without the option every such
// name is, so they go on.
func TestNativeZonalNames(t *testing.T) {
	web := serviceObj("demo", "web", nil, httpPort)
	clusterIP := serviceObj("demo", "serve", []string{vipLocal}, httpPort)
	local := localSlice("demo", "web", "local", []portSpec{httpPort}, ep{ip: "10.1.0.5", hostname: "web-0", zone: "zone-a"}, ep{ip: "10.1.0.6", zone: "zone-b"})
	serveLocal := localSlice("demo", "serve", "serve-local", []portSpec{httpPort}, ep{ip: "10.1.1.5", zone: "zone-a"})
	objs := []runtime.Object{
		namespaceObj("demo"), web, clusterIP, local, serveLocal,
		importObj("demo", "web", nil, []portSpec{httpPort}, withStrategy("RemoteAndLocal"), headlessImport),
		importObj("demo", "serve", []string{vipSet}, []portSpec{httpPort}, withStrategy("RemoteAndLocal")),
		importedSlice("demo", "web", "member2", "a", []portSpec{httpPort}, ep{ip: "10.2.0.5", zone: "zone-a"}, ep{ip: "10.2.0.6", zone: "zone-c"}),
	}
	kubeWorld := &kubeAPI{svcs: []corev1.Service{*web, *clusterIP}, slices: []discoveryv1.EndpointSlice{*local, *serveLocal}, nss: []corev1.Namespace{*namespaceObj("demo")}}
	kubeconfig := kubeWorld.serve(t)
	k := kubePlugin(t, kubeconfig, "zonal\n"+memberLabels)
	f := newFixtureBeside(t, baseConfig(), k, objs...)
	a := func(name string, ips ...string) []dns.RR {
		var rrs []dns.RR
		for _, ip := range ips {
			rrs = append(rrs, test.A(name+" 5 IN A "+ip))
		}
		return rrs
	}
	const (
		pinA    = "zone-a.pin._zone.web.demo.svc.cluster.local."
		pinC    = "zone-c.pin._zone.web.demo.svc.cluster.local."
		pinD    = "zone-d.pin._zone.web.demo.svc.cluster.local."
		preferD = "zone-d.prefer._zone.web.demo.svc.cluster.local."
		srvA    = "zone-a.prefer._zone.web.demo.svc.cluster.local."
	)
	soa := test.SOA("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5")
	f.check([]test.Case{
		{Qname: pinA, Qtype: dns.TypeA, Authoritative: true, Answer: a(pinA, "10.1.0.5", "10.2.0.5")},
		{Qname: pinC, Qtype: dns.TypeA, Authoritative: true, Answer: a(pinC, "10.2.0.6")}, // another cluster's zone
		{Qname: pinD, Qtype: dns.TypeA, Authoritative: true, Ns: []dns.RR{soa}},
		{Qname: preferD, Qtype: dns.TypeA, Authoritative: true, Answer: a(preferD, "10.1.0.5", "10.1.0.6", "10.2.0.5", "10.2.0.6")},
		{Qname: pinA, Qtype: dns.TypeTXT, Authoritative: true, Ns: []dns.RR{soa}},
		{Qname: srvA, Qtype: dns.TypeSRV, Authoritative: true, Answer: []dns.RR{
			test.SRV(srvA + " 5 IN SRV 0 50 80 10-2-0-5.web.demo.svc.cluster.local."),
			test.SRV(srvA + " 5 IN SRV 0 50 80 web-0.web.demo.svc.cluster.local."),
		}, Extra: []dns.RR{
			test.A("10-2-0-5.web.demo.svc.cluster.local. 5 IN A 10.2.0.5"),
			test.A("web-0.web.demo.svc.cluster.local. 5 IN A 10.1.0.5"),
		}},
	})
	// A ClusterIP service's zonal name, and a name only shaped so, are the
	// kubernetes plugin's: NXDOMAIN.
	for _, name := range []string{"zone-a.pin._zone.serve.demo.svc.cluster.local.", "zone-a.near._zone.web.demo.svc.cluster.local."} {
		if got, want := normalized(f.query(name, dns.TypeA)), normalized(serve(t, k, name, dns.TypeA)); got != want || !strings.HasPrefix(got, "NXDOMAIN") {
			t.Errorf("%s: mcs answers\n%s\nthe kubernetes plugin alone\n%s", name, got, want)
		}
	}
	// Without the zonal option no zonal name exists.
	plain := kubePlugin(t, kubeconfig, memberLabels)
	g := newFixtureBeside(t, baseConfig(), plain, objs...)
	if got := g.query(pinA, dns.TypeA); got.Rcode != dns.RcodeNameError {
		t.Errorf("%s without the zonal option: want NXDOMAIN, got\n%s", pinA, got)
	}
}
