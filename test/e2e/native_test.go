//go:build lab

package e2e

import (
	"testing"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The sets of the decision table (plugin/mcs/README.md, "Native names: the decision"), for service "svc" of a fixture.
type addrSet string

const (
	vipLocal addrSet = "VIP_local" // svc's ClusterIP in member1
	vipSet   addrSet = "VIP_set"   // the ServiceImport's spec.ips
	setL     addrSet = "L"         // ready endpoints of member1's own slices
	setR     addrSet = "R"         // ready endpoints imported from member2 and member3
)

// The endpoints of svc: member1's own (one with its ready condition unset,
// which counts as ready) and one each imported from member2 and member3.
var (
	localEndpoints = []endpoint{ep("10.10.0.11"), ep("10.10.0.12").readyUnset()}
	member2EP      = ep("10.12.0.21")
	member3EP      = ep("10.14.0.31")
	setVIP         = "10.99.0.1"
)

// decisionCase is one cell of the decision table: the objects of svc and
// the set answered, or none when the query goes on to the kubernetes plugin.
type decisionCase struct {
	name      string
	strategy  string
	headless  bool
	endpoints bool // ask the block with answer endpoints, else answer vip
	l, r      bool // L, R non-empty: else their slices hold only endpoints that are not ready
	noService bool // member1 has no Service svc
	noSetVIP  bool // the ServiceImport has no spec.ips
	want      []addrSet
	// kubernetes is the rcode and number of answers of the kubernetes
	// plugin's answer, when want is empty.
	kubernetes [2]int
}

// objects are svc's Service, ServiceImport and slices.
func (c decisionCase) objects(f *fixture) []runtime.Object {
	spec := importSpec{headless: c.headless, strategy: c.strategy}
	if !c.headless && !c.noSetVIP {
		spec.ips = []string{setVIP}
	}
	objs := []runtime.Object{f.serviceImport("svc", spec), f.ownSlice("svc", ready(c.l, localEndpoints...)...)}
	if !c.noService {
		objs = append(objs, f.service("svc", c.headless))
	}
	return append(objs,
		f.importedSlice("svc", member2, ready(c.r, member2EP)...),
		f.importedSlice("svc", member3, ready(c.r, member3EP)...))
}

func ready(ok bool, eps ...endpoint) []endpoint {
	if ok {
		return eps
	}
	return unready(eps...)
}

// addresses are the addresses of sets.
func (f *fixture) addresses(sets ...addrSet) []string {
	var out []string
	for _, s := range sets {
		switch s {
		case vipLocal:
			out = append(out, f.clusterIP("svc"))
		case vipSet:
			out = append(out, setVIP)
		case setL:
			out = append(out, ips(localEndpoints)...)
		case setR:
			out = append(out, member2EP.ip, member3EP.ip)
		}
	}
	return out
}

func ips(eps []endpoint) []string {
	var out []string
	for _, e := range eps {
		out = append(out, e.ip)
	}
	return out
}

// The strategies as the annotation spells them.
const (
	localFirst     = string(api.LocalFirst)
	remoteAndLocal = string(api.RemoteAndLocal)
)

// decisionTable is every row of the plugin README's decision table for an A query of
// svc.<ns>.svc.cluster.local.
var decisionTable = []decisionCase{
	// LocalFirst, ClusterIP service, answer vip.
	{name: "LocalFirst/vip/L", strategy: localFirst, l: true, r: true, want: []addrSet{vipLocal}},
	{name: "LocalFirst/vip/L without local Service", strategy: localFirst, l: true, r: true, noService: true, want: []addrSet{setL}},
	{name: "LocalFirst/vip/R", strategy: localFirst, r: true, want: []addrSet{vipSet}},
	{name: "LocalFirst/vip/R without VIP_set", strategy: localFirst, r: true, noSetVIP: true, want: []addrSet{setR}},
	{name: "LocalFirst/vip/none", strategy: localFirst, want: []addrSet{vipLocal}},
	{name: "LocalFirst/vip/none without local Service", strategy: localFirst, noService: true, want: []addrSet{vipSet}},
	// LocalFirst, headless service.
	{name: "LocalFirst/headless/L", strategy: localFirst, headless: true, l: true, r: true, want: []addrSet{setL}},
	{name: "LocalFirst/headless/R", strategy: localFirst, headless: true, r: true, want: []addrSet{setR}},
	{name: "LocalFirst/headless/none", strategy: localFirst, headless: true, kubernetes: [2]int{dns.RcodeNameError, 0}},
	// LocalFirst, ClusterIP service, answer endpoints.
	{name: "LocalFirst/endpoints/L", strategy: localFirst, endpoints: true, l: true, r: true, want: []addrSet{setL}},
	{name: "LocalFirst/endpoints/R", strategy: localFirst, endpoints: true, r: true, want: []addrSet{setR}},
	{name: "LocalFirst/endpoints/none", strategy: localFirst, endpoints: true, kubernetes: [2]int{dns.RcodeSuccess, 1}},
	// RemoteAndLocal, ClusterIP service, answer vip.
	{name: "RemoteAndLocal/vip", strategy: remoteAndLocal, l: true, r: true, want: []addrSet{vipSet}},
	{name: "RemoteAndLocal/vip/L empty", strategy: remoteAndLocal, r: true, want: []addrSet{vipSet}},
	{name: "RemoteAndLocal/vip without VIP_set", strategy: remoteAndLocal, l: true, r: true, noSetVIP: true, want: []addrSet{setL, setR}},
	// RemoteAndLocal, headless service.
	{name: "RemoteAndLocal/headless", strategy: remoteAndLocal, headless: true, l: true, r: true, want: []addrSet{setL, setR}},
	{name: "RemoteAndLocal/headless/L only", strategy: remoteAndLocal, headless: true, l: true, want: []addrSet{setL}},
	{name: "RemoteAndLocal/headless/none", strategy: remoteAndLocal, headless: true, kubernetes: [2]int{dns.RcodeNameError, 0}},
	// RemoteAndLocal, ClusterIP service, answer endpoints.
	{name: "RemoteAndLocal/endpoints", strategy: remoteAndLocal, endpoints: true, l: true, r: true, want: []addrSet{setL, setR}},
	{name: "RemoteAndLocal/endpoints/R only", strategy: remoteAndLocal, endpoints: true, r: true, want: []addrSet{setR}},
}

func TestDecisionTable(t *testing.T) {
	srv := startServers(t)
	for _, c := range decisionTable {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.apply(c.objects(f)...)
			s := srv.of(c)
			name := f.native("svc")
			if len(c.want) > 0 {
				s.expect(t, name, dns.TypeA, answer(s.addrs(name, f.addresses(c.want...)...)))
				return
			}
			// Remote endpoints first, which mcs answers: the comparison
			// below then runs once mcs knows the service.
			withRemote := c
			withRemote.r = true
			f.apply(withRemote.objects(f)...)
			s.expect(t, name, dns.TypeA, answer(s.addrs(name, f.addresses(setR)...)))
			f.apply(c.objects(f)...)
			expectSame(t, s, srv.kubernetes, name, dns.TypeA, c.kubernetes[0], c.kubernetes[1])
		})
	}
}

// of is the block a decision case asks.
func (srv *servers) of(c decisionCase) *server {
	if c.endpoints {
		return srv.endpoints
	}
	return srv.vip
}

// TestLocalFirstFailover: the answer moves to the remote set as soon as no
// local endpoint is ready, and back when one is again.
func TestLocalFirstFailover(t *testing.T) {
	srv := startServers(t)
	for _, c := range []struct {
		decisionCase
		fallback []addrSet
	}{
		{decisionCase{name: "vip", strategy: localFirst, l: true, r: true, want: []addrSet{vipLocal}}, []addrSet{vipSet}},
		{decisionCase{name: "endpoints", strategy: localFirst, endpoints: true, l: true, r: true, want: []addrSet{setL}}, []addrSet{setR}},
		{decisionCase{name: "headless", strategy: localFirst, headless: true, l: true, r: true, want: []addrSet{setL}}, []addrSet{setR}},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			f.apply(c.objects(f)...)
			s, name := srv.of(c.decisionCase), f.native("svc")
			local := answer(s.addrs(name, f.addresses(c.want...)...))
			s.expect(t, name, dns.TypeA, local)

			f.apply(f.ownSlice("svc", unready(localEndpoints...)...))
			s.expect(t, name, dns.TypeA, answer(s.addrs(name, f.addresses(c.fallback...)...)))

			f.apply(f.ownSlice("svc", localEndpoints...))
			s.expect(t, name, dns.TypeA, local)
		})
	}
}

// TestRemoteAndLocalFollowsChanges: endpoints, VIPs and imports that come
// and go change the answer.
func TestRemoteAndLocalFollowsChanges(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	c := decisionCase{strategy: remoteAndLocal, l: true, r: true}
	f.apply(c.objects(f)...)
	name := f.native("svc")
	s := srv.endpoints
	s.expect(t, name, dns.TypeA, answer(s.addrs(name, f.addresses(setL, setR)...)))

	member3Slice := f.importedSlice("svc", member3, member3EP)
	f.deleteSlice(member3Slice)
	s.expect(t, name, dns.TypeA, answer(s.addrs(name, append(ips(localEndpoints), member2EP.ip)...)))

	f.apply(f.importedSlice("svc", member2, member2EP, ep("10.12.0.22")))
	s.expect(t, name, dns.TypeA, answer(s.addrs(name, append(ips(localEndpoints), member2EP.ip, "10.12.0.22")...)))

	f.apply(f.ownSlice("svc", unready(localEndpoints...)...), member3Slice)
	s.expect(t, name, dns.TypeA, answer(s.addrs(name, member2EP.ip, "10.12.0.22", member3EP.ip)))

	s = srv.vip
	s.expect(t, name, dns.TypeA, answer(s.addrs(name, setVIP)))
	f.apply(f.serviceImport("svc", importSpec{strategy: remoteAndLocal, ips: []string{"10.99.0.2"}}))
	s.expect(t, name, dns.TypeA, answer(s.addrs(name, "10.99.0.2")))

	// Without the import, the name is the kubernetes plugin's again, and the
	// clusterset name is gone.
	f.deleteImport("svc")
	s.expect(t, f.clusterset("svc"), dns.TypeA, s.nxdomain("clusterset.local."))
	expectSame(t, s, srv.kubernetes, name, dns.TypeA, dns.RcodeSuccess, 1)
}

// TestStrategyAnnotationAndOption: mcs answers the native names of imports
// with the strategy annotation, and with the strategy option those of every
// import, the annotation winning; it passes every other import's names to
// the kubernetes plugin untouched.
func TestStrategyAnnotationAndOption(t *testing.T) {
	srv := startServers(t)
	f := newFixture(t)
	name := f.native("svc")
	withStrategy := func(strategy string, l bool) {
		c := decisionCase{strategy: strategy, l: l, r: true}
		f.apply(c.objects(f)...)
	}

	// No annotation, no local endpoint: the option's LocalFirst falls back to
	// VIP_set; without the option, the kubernetes plugin answers VIP_local.
	withStrategy("", false)
	srv.localFirst.expect(t, name, dns.TypeA, answer(srv.localFirst.addrs(name, setVIP)))
	srv.vip.expect(t, f.clusterset("svc"), dns.TypeA, answer(srv.vip.addrs(f.clusterset("svc"), setVIP)))
	expectSame(t, srv.vip, srv.kubernetes, name, dns.TypeA, dns.RcodeSuccess, 1)

	// The annotation, RemoteAndLocal, wins over the option: VIP_set although
	// a local endpoint is ready.
	withStrategy(remoteAndLocal, true)
	srv.vip.expect(t, name, dns.TypeA, answer(srv.vip.addrs(name, setVIP)))
	srv.localFirst.expect(t, name, dns.TypeA, answer(srv.localFirst.addrs(name, setVIP)))

	// An annotation that is no strategy is ignored: the option applies, and
	// without it the kubernetes plugin answers again.
	withStrategy("Nearest", true)
	srv.localFirst.expect(t, name, dns.TypeA, answer(srv.localFirst.addrs(name, f.clusterIP("svc"))))
	expectSame(t, srv.vip, srv.kubernetes, name, dns.TypeA, dns.RcodeSuccess, 1)
}
