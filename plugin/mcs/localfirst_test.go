package mcs

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Addresses of LocalFirst's policy table: two local endpoints, and one in
// each of member2, member3 and member4. This cluster is member1.
const (
	local2IP  = "10.1.0.2"
	remote4IP = "10.4.0.1"
)

// policy is one row's world: how many local endpoints are ready, the
// import's policy annotations ("" for none), which remote clusters are
// stale (Lease expired) and which have no ready endpoint.
type policy struct {
	localReady    int
	minReady      string
	order         string
	stale, absent []string
	// providerVIPs: the controller's provider Services of the order
	// (api.AnnotationProviderVIPs), each with a copy of its cluster's
	// imported slice joined to it ("" for none).
	providerVIPs string
}

func (p policy) objects() []runtime.Object {
	annotations := map[string]string{api.AnnotationStrategy: string(api.LocalFirst)}
	if p.minReady != "" {
		annotations[api.AnnotationMinReadyEndpoints] = p.minReady
	}
	if p.order != "" {
		annotations[api.AnnotationFailoverOrder] = p.order
	}
	if p.providerVIPs != "" {
		annotations[api.AnnotationProviderVIPs] = p.providerVIPs
	}
	imp := importObj("demo", "serve", []string{vipSet}, []portSpec{httpPort})
	imp.Annotations = annotations
	local := []ep{{ip: localIP, notReady: p.localReady < 1}, {ip: local2IP, notReady: p.localReady < 2}}
	objs := []runtime.Object{namespaceObj("demo"), imp, serviceObj("demo", "serve", []string{vipLocal}, httpPort), localSlice("demo", "serve", "serve-a", nil, local...)}
	for c, ip := range map[string]string{"member2": remoteIP, "member3": remote3IP, "member4": remote4IP} {
		objs = append(objs, importedSlice("demo", "serve", c, "serve-x", nil, ep{ip: ip, notReady: slices.Contains(p.absent, c)}))
		if p.providerVIPs != "" {
			objs = append(objs, providerCopy(importedSlice("demo", "serve", c, "serve-x", nil, ep{ip: ip, notReady: slices.Contains(p.absent, c)})))
		}
		renewed := time.Now()
		if slices.Contains(p.stale, c) {
			renewed = renewed.Add(-time.Hour)
		}
		objs = append(objs, leaseObj(c, renewed, 30))
	}
	return objs
}

// providerCopy is s as the controller copies it for a provider Service
// (api/providers.go): the same endpoints, joined to that Service.
func providerCopy(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	s.Name = api.ProviderSlicePrefix + s.Name
	s.Labels[discoveryv1.LabelServiceName] = api.ProviderService(s.Labels[mcsv1b1.LabelServiceName], s.Labels[mcsv1b1.LabelSourceCluster])
	return s
}

// The VIPs of the provider Services of member2 and member3.
const (
	vipMember2 = "10.96.2.2"
	vipMember3 = "10.96.3.3"
	bothVIPs   = "member3=" + vipMember3 + ",member2=" + vipMember2
)

// TestLocalFirstPolicy walks LocalFirst's minimum of ready local endpoints
// and its failover order, with stale providers, for both answer modes.
// Below the minimum, a VIP answer is the VIP of the first listed provider
// with ready endpoints, through the provider Service the controller makes
// for an order; before it has one, the clusterset VIP, which spreads over
// every provider whatever the order.
func TestLocalFirstPolicy(t *testing.T) {
	all := []string{remoteIP, remote3IP, remote4IP}
	rows := []struct {
		name   string
		answer answerMode
		p      policy
		want   []string
	}{
		{"no policy: one local ready → L", answerEndpoints, policy{localReady: 1}, []string{localIP}},
		{"no policy: none local → every remote", answerEndpoints, policy{}, all},
		{"minimum 2, one local ready → every remote", answerEndpoints, policy{localReady: 1, minReady: "2"}, all},
		{"minimum 2, two local ready → L", answerEndpoints, policy{localReady: 2, minReady: "2"}, []string{localIP, local2IP}},
		{"minimum 2, one local ready, no remote ready → L all the same", answerEndpoints, policy{localReady: 1, minReady: "2", absent: []string{"member2", "member3", "member4"}}, []string{localIP}},
		// A stale cluster is used only when nothing else is left: the
		// local one below the minimum is not nothing.
		{"minimum 2, one local ready, every remote stale → L", answerEndpoints, policy{localReady: 1, minReady: "2", stale: []string{"member2", "member3", "member4"}}, []string{localIP}},
		{"minimum not a number → the default", answerEndpoints, policy{localReady: 1, minReady: "two"}, []string{localIP}},
		{"minimum 0 → the default", answerEndpoints, policy{localReady: 1, minReady: "0"}, []string{localIP}},
		{"order member3,member2 → member3", answerEndpoints, policy{order: "member3,member2"}, []string{remote3IP}},
		{"order member4 → member4", answerEndpoints, policy{order: "member4"}, []string{remote4IP}},
		{"order naming this cluster → skipped", answerEndpoints, policy{order: "member1,member3"}, []string{remote3IP}},
		{"order, minimum 2, one local ready → the first listed", answerEndpoints, policy{localReady: 1, minReady: "2", order: "member3,member2"}, []string{remote3IP}},
		{"order, minimum 2, two local ready → L", answerEndpoints, policy{localReady: 2, minReady: "2", order: "member3,member2"}, []string{localIP, local2IP}},
		{"first listed without ready endpoints → the next", answerEndpoints, policy{order: "member3,member2", absent: []string{"member3"}}, []string{remoteIP}},
		{"first listed stale → the next, fresh", answerEndpoints, policy{order: "member3,member2", stale: []string{"member3"}}, []string{remoteIP}},
		{"listed stale → the unlisted fresh ones first", answerEndpoints, policy{order: "member3", stale: []string{"member3"}}, []string{remoteIP, remote4IP}},
		{"listed without endpoints → the unlisted together", answerEndpoints, policy{order: "member3", absent: []string{"member3"}}, []string{remoteIP, remote4IP}},
		{"every one stale → the order among the stale", answerEndpoints, policy{order: "member3,member2", stale: []string{"member2", "member3", "member4"}}, []string{remote3IP}},
		{"listed unknown cluster → the unlisted", answerEndpoints, policy{order: "member9"}, all},
		{"vip: one local ready → VIP_local", answerVIP, policy{localReady: 1}, []string{vipLocal}},
		{"vip: minimum 2, one local ready → VIP_set", answerVIP, policy{localReady: 1, minReady: "2"}, []string{vipSet}},
		{"vip: minimum 2, two local ready → VIP_local", answerVIP, policy{localReady: 2, minReady: "2"}, []string{vipLocal}},
		{"vip: minimum 2, one local ready, no remote ready → VIP_local", answerVIP, policy{localReady: 1, minReady: "2", absent: []string{"member2", "member3", "member4"}}, []string{vipLocal}},
		{"vip: order, no provider Service yet → VIP_set", answerVIP, policy{order: "member3,member2"}, []string{vipSet}},
		{"vip: order, first listed stale, no provider Service yet → VIP_set", answerVIP, policy{order: "member3", stale: []string{"member3"}}, []string{vipSet}},
		{"vip: order → the first listed's VIP", answerVIP, policy{order: "member3,member2", providerVIPs: bothVIPs}, []string{vipMember3}},
		{"vip: order, minimum 2, one local ready → the first listed's VIP", answerVIP, policy{localReady: 1, minReady: "2", order: "member3,member2", providerVIPs: bothVIPs}, []string{vipMember3}},
		{"vip: order, minimum 2, two local ready → VIP_local", answerVIP, policy{localReady: 2, minReady: "2", order: "member3,member2", providerVIPs: bothVIPs}, []string{vipLocal}},
		{"vip: first listed without ready endpoints → the next's VIP", answerVIP, policy{order: "member3,member2", absent: []string{"member3"}, providerVIPs: bothVIPs}, []string{vipMember2}},
		{"vip: first listed stale → the next's VIP, fresh", answerVIP, policy{order: "member3,member2", stale: []string{"member3"}, providerVIPs: bothVIPs}, []string{vipMember2}},
		{"vip: every one stale → the order among the stale", answerVIP, policy{order: "member3,member2", stale: []string{"member2", "member3", "member4"}, providerVIPs: bothVIPs}, []string{vipMember3}},
		{"vip: first listed's provider Service not made yet → VIP_set", answerVIP, policy{order: "member3,member2", providerVIPs: "member2=" + vipMember2}, []string{vipSet}},
		{"vip: no listed provider ready → VIP_set", answerVIP, policy{order: "member3,member2", absent: []string{"member2", "member3"}, providerVIPs: bothVIPs}, []string{vipSet}},
		{"vip: one local ready, order → VIP_local", answerVIP, policy{localReady: 1, order: "member3,member2", providerVIPs: bothVIPs}, []string{vipLocal}},
		{"provider Services, order, endpoints → the first listed", answerEndpoints, policy{order: "member3,member2", providerVIPs: bothVIPs}, []string{remote3IP}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.answer = row.answer
			f := newFixture(t, cfg, row.p.objects()...)
			resp := f.query(serveName, dns.TypeA)
			if got := addresses(resp); !slices.Equal(got, row.want) || resp.Rcode != dns.RcodeSuccess {
				t.Fatalf("%+v: want NOERROR %v, got %v\n%s", row.p, row.want, got, resp)
			}
		})
	}
}

// The slices the provider Services route to are copies, not endpoints of
// the service: an address only a copy has (the controller never writes
// one; it shows which slices answer) is never answered.
func TestProviderCopiesNotAnswered(t *testing.T) {
	objs := policy{order: "member3,member2", providerVIPs: bothVIPs}.objects()
	objs = append(objs, providerCopy(importedSlice("demo", "serve", "member4", "serve-y", nil, ep{ip: "10.4.0.99"})))
	cfg := baseConfig()
	cfg.answer = answerEndpoints
	f := newFixture(t, cfg, objs...)
	if got := addresses(f.query(serveName, dns.TypeA)); !slices.Equal(got, []string{remote3IP}) {
		t.Errorf("order member3,member2: %v, want member3's %s alone", got, remote3IP)
	}
	objs = append(policy{}.objects(), providerCopy(importedSlice("demo", "serve", "member4", "serve-y", nil, ep{ip: "10.4.0.99"})))
	f = newFixture(t, cfg, objs...)
	if got, want := addresses(f.query(serveName, dns.TypeA)), []string{remoteIP, remote3IP, remote4IP}; !slices.Equal(got, want) {
		t.Errorf("no order: %v, want %v", got, want)
	}
}
