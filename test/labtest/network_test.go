//go:build lab

package labtest_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/labnet"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// TestKubeProxy checks what the tests of the VIP path rely on: from a
// cluster's node, a connection to a Service's ClusterIP reaches its ready
// pods through that cluster's kube-proxy, spread over them; the pods'
// addresses are bound in the lab's pods' network only, never on the host;
// the other clusters' nodes know nothing of that ClusterIP; and with no pod
// left the ClusterIP refuses at once (kube-proxy's reject rule) rather than
// hangs.
func TestKubeProxy(t *testing.T) {
	lab := labtest.Get(t)
	lab.Network(t)
	m1 := labtest.Member1
	ns := lab.Namespace(t, m1)
	lab.Workload(t, m1, ns, "serve", 2, false)
	lab.PlayPods(t, ns, "serve", m1)
	labtest.Eventually(t, timeout, func(ctx context.Context) error {
		_, err := lab.ReadyPodIPs(ctx, t, m1, ns, "serve", 2)
		return err
	})
	url := "http://" + lab.ClusterIP(t, m1, ns, "serve", timeout) + ":80/"

	labtest.Eventually(t, timeout, func(ctx context.Context) error {
		got := map[string]int{}
		for range 20 {
			reply, err := labnet.Node(m1).Get(ctx, url, time.Second)
			if err != nil {
				return err
			}
			cluster, pod, ok := labnet.Replier(reply)
			if !ok || cluster != m1 {
				return fmt.Errorf("reply %q, want one of member1's pods", reply)
			}
			got[pod]++
		}
		if len(got) != 2 {
			return fmt.Errorf("replies by pod %v, want both pods", got)
		}
		return nil
	})

	hostAddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range hostAddrs {
		if strings.HasPrefix(a.String(), "10.") {
			t.Errorf("pod address %s is bound on the host", a)
		}
	}

	if reply, err := labnet.Node(labtest.Member2).Get(t.Context(), url, time.Second); err == nil {
		t.Errorf("member2's node reached member1's ClusterIP: %q", reply)
	}

	lab.Apply(t, m1, labtest.Deployment(ns, "serve", 0))
	labtest.Eventually(t, timeout, func(ctx context.Context) error {
		start := time.Now()
		reply, err := labnet.Node(m1).Get(ctx, url, 5*time.Second)
		if err == nil {
			return fmt.Errorf("a Service without pods answered %q", reply)
		}
		if took := time.Since(start); took > time.Second {
			return fmt.Errorf("a Service without pods took %s to fail (%v), want a refusal", took, err)
		}
		return nil
	})
}
