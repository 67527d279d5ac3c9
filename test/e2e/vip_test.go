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
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
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
	l, ns, vip := fooThroughKubeProxy(t)

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

// LocalFirst's failover order with answer vip, through a real kube-proxy:
// member2 consumes foo from member1 and member3, LocalFirst with the
// failover order member3, member1, and runs no pod of its own, so it is
// below its minimum. Its coredns-mcs answers the VIP of member3's provider
// Service, and every connection reaches member3's pods alone, not member1's
// as derived-foo's VIP would spread them. With member3's API server hung
// past its Lease, member3 is stale: the answer moves to member1's provider
// VIP, and every connection reaches member1; back once member3 is.
func TestFailoverOrderThroughKubeProxy(t *testing.T) {
	l, ns, vip := fooThroughKubeProxy(t)
	ordered := labtest.MultiClusterService(ns, "foo", api.LocalFirst, []v1alpha1.ClusterName{m1, labtest.Member3}, []v1alpha1.ClusterName{m2})
	ordered.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{FailoverOrder: []v1alpha1.ClusterName{labtest.Member3, m1}}
	l.Apply(t, labtest.Hub, ordered)

	name := native("foo", ns)
	first, second := clusterIP(t, m2, ns, api.ProviderService("foo", labtest.Member3)), clusterIP(t, m2, ns, api.ProviderService("foo", m1))
	vip.expectWithin(t, converge, name, dns.TypeA, answer(vip.addrs(name, first)))
	repliesFrom(t, vip, name, map[string]bool{labtest.Member3: true})

	thaw := l.Freeze(t, labtest.Member3, "kube-apiserver")
	vip.expectWithin(t, converge, name, dns.TypeA, answer(vip.addrs(name, second)))
	repliesFrom(t, vip, name, map[string]bool{m1: true})

	thaw()
	vip.expectWithin(t, converge, name, dns.TypeA, answer(vip.addrs(name, first)))
	repliesFrom(t, vip, name, map[string]bool{labtest.Member3: true})
}

// fooThroughKubeProxy provides foo from member1's and member3's playing
// pods to member2 (RemoteAndLocal), with short Leases, and returns the lab,
// the namespace and member2's coredns-mcs with answer vip.
func fooThroughKubeProxy(t *testing.T) (*labtest.Lab, string, *server) {
	t.Helper()
	l := labtest.Get(t)
	l.Network(t)
	ns := l.Namespace(t)
	startController(t, ns, shortLeases...)
	vip, endpoints := member2DNS(t)
	l.PlayPods(t, ns, "foo", m1, m3)
	fooFromTwo(t, ns, endpoints)
	return l, ns, vip
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
