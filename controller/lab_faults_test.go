//go:build lab

package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// A member cut off from the controller (connections refused, as a firewall
// or a restarting API server does) changes meanwhile. When the
// MultiClusterService says its slices are collected again, member2 holds
// the change already: the controller lists a member that comes back afresh
// before it counts it as reachable. Its informers would otherwise wait out
// client-go's watch back-off, up to a minute, while the controller renewed
// the member's Lease from what it saw before the cut. The cut is a proxy
// in front of member1's API server, so the shared lab is untouched.
func TestMemberComesBack(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub, m1, m3)
	t.Cleanup(func() { deleteNamespace(t, m2, ns) })
	proxy, kubeconfig := l.APIProxy(t, m1, labtest.Members...)
	proxy.Up(t)
	start(t, kubeconfig, ns)
	workload(t, m1, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		if err := importsFrom(ctx, t, m1, 1, ns, "foo", m2); err != nil {
			return err
		}
		_, err := conditionsAre(ctx, t, ns, "foo", allTrue)
		return err
	})

	proxy.Down()
	cut := time.Now()
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		m, err := getMCS(ctx, t, ns, "foo")
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceCollected); c == nil || c.Reason != "ClusterUnreachable" {
			return fmt.Errorf("%s is %+v, want ClusterUnreachable", v1alpha1.EndpointSliceCollected, c)
		}
		return nil
	})
	workload(t, m1, ns, "foo", 2, false)
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		_, err := readyIPs(ctx, t, m1, ns, "foo", 2)
		return err
	})
	// Long enough for the informers' back-off to grow well past the probe
	// interval: a watch retried by chance just in time would hide the bug.
	time.Sleep(time.Until(cut.Add(30 * time.Second)))

	proxy.Up(t)
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		_, err := conditionsAre(ctx, t, ns, "foo", allTrue)
		return err
	})
	if err := importsFrom(t.Context(), t, m1, 2, ns, "foo", m2); err != nil {
		t.Errorf("member1 counts as collected again, but %v", err)
	}
}
