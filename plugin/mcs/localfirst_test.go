package mcs

import (
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/runtime"

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
}

func (p policy) objects() []runtime.Object {
	annotations := map[string]string{api.AnnotationStrategy: string(api.LocalFirst)}
	if p.minReady != "" {
		annotations[api.AnnotationMinReadyEndpoints] = p.minReady
	}
	if p.order != "" {
		annotations[api.AnnotationFailoverOrder] = p.order
	}
	imp := importObj("demo", "serve", []string{vipSet}, []portSpec{httpPort})
	imp.Annotations = annotations
	local := []ep{{ip: localIP, notReady: p.localReady < 1}, {ip: local2IP, notReady: p.localReady < 2}}
	objs := []runtime.Object{namespaceObj("demo"), imp, serviceObj("demo", "serve", []string{vipLocal}, httpPort), localSlice("demo", "serve", "serve-a", nil, local...)}
	for c, ip := range map[string]string{"member2": remoteIP, "member3": remote3IP, "member4": remote4IP} {
		objs = append(objs, importedSlice("demo", "serve", c, "serve-x", nil, ep{ip: ip, notReady: slices.Contains(p.absent, c)}))
		renewed := time.Now()
		if slices.Contains(p.stale, c) {
			renewed = renewed.Add(-time.Hour)
		}
		objs = append(objs, leaseObj(c, renewed, 30))
	}
	return objs
}

// TestLocalFirstPolicy walks LocalFirst's minimum of ready local endpoints
// and its failover order, with stale providers, for both answer modes. A
// VIP answer cannot name clusters: below the minimum it is the clusterset
// VIP, which spreads over every provider whatever the order.
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
		{"vip: order → VIP_set", answerVIP, policy{order: "member3,member2"}, []string{vipSet}},
		{"vip: order, first listed stale → VIP_set", answerVIP, policy{order: "member3", stale: []string{"member3"}}, []string{vipSet}},
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
