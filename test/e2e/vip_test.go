//go:build lab

package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labnet"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// The shipped default, answer vip, through a real kube-proxy: member2
// consumes foo from member1 and member3 (RemoteAndLocal). A client on
// member2's node resolves foo's native and clusterset names through
// member2's coredns-mcs, gets derived-foo's VIP for both, and connects:
// member2's kube-proxy spreads the connections over both providers' pods.
// With member1's API server hung past its Lease, member1 is stale: its
// imported endpoints are not ready, and kube-proxy sends every connection
// to member3, although member1's pods still answer; back once member1 is.
func TestVIPThroughKubeProxy(t *testing.T) {
	l := labtest.Get(t)
	l.Network(t)
	ns := l.Namespace(t)
	startController(t, ns, shortLeases...)
	vip, endpoints := member2DNS(t)
	l.PlayPods(t, ns, "foo", m1, m3)
	fooFromTwo(t, ns, endpoints)

	derived := clusterIP(t, m2, ns, api.DerivedPrefix+"foo")
	names := []string{native("foo", ns), clusterset("foo", ns)}
	for _, name := range names {
		vip.expect(t, name, dns.TypeA, answer(vip.addrs(name, derived)))
	}
	both := map[string]bool{m1: true, labtest.Member3: true}
	for _, name := range names {
		repliesFrom(t, vip, name, both)
	}

	thaw := l.Freeze(t, m1, "kube-apiserver")
	staleForTheVIP(t, ns, "foo", m1, true)
	repliesFrom(t, vip, names[0], map[string]bool{labtest.Member3: true})

	thaw()
	staleForTheVIP(t, ns, "foo", m1, false)
	repliesFrom(t, vip, names[0], both)
}

// vipConnections is how many connections repliesFrom counts: enough that
// each of two clusters' pods is missed with odds of 2^-40.
const vipConnections = 40

// repliesFrom waits until vipConnections new connections to what s answers
// for name, from member2's node, are all answered, by pods of exactly the
// clusters want. kube-proxy follows a change within a second or so.
func repliesFrom(t *testing.T, s *server, name string, want map[string]bool) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		r, err := s.ask(ctx, name, dns.TypeA, "udp")
		if err != nil || len(r.Answer) == 0 {
			return fmt.Errorf("%s: %v %v", name, r, err)
		}
		a, ok := r.Answer[0].(*dns.A)
		if !ok {
			return fmt.Errorf("%s: %v", name, r.Answer)
		}
		url := "http://" + net.JoinHostPort(a.A.String(), "80") + "/"
		got := map[string]bool{}
		for range vipConnections {
			reply, err := labnet.Node(m2).Get(ctx, url, time.Second)
			if err != nil {
				return fmt.Errorf("%s (%s): %w", name, url, err)
			}
			cluster, _, ok := labnet.Replier(reply)
			if !ok {
				return errors.New("reply " + reply)
			}
			got[cluster] = true
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("%s (%s): replies from %v, want %v", name, url, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
		}
		return nil
	})
}
