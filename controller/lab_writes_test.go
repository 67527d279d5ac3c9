//go:build lab

package controller_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// writesSoFar sums mcs_writes_total of every kind but Lease (renewed on a
// clock by design) and of every cluster, by kind.
func writesSoFar(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := legacyregistry.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "mcs_writes_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			kind := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					kind = l.GetValue()
				}
			}
			if kind != "Lease" {
				out[kind] += m.GetCounter().GetValue()
			}
		}
	}
	return out
}

func delta(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// A source change costs one write per consumption cluster, and a restart
// over an unchanged world costs none.
func TestWrites(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	stop := runStoppable(t, ns)
	workload(t, m1, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2, m3}))
	converged := func(n int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			if err := importsFrom(ctx, t, m1, n, ns, "foo", m2, m3); err != nil {
				return err
			}
			_, err := conditionsAre(ctx, t, ns, "foo", allTrue)
			return err
		}
	}
	labtest.Eventually(t, wait, converged(1))
	settle()

	before := writesSoFar(t)
	workload(t, m1, ns, "foo", 2, false)
	labtest.Eventually(t, wait, converged(2))
	settle()
	// kube-controller-manager may write the source slice more than once
	// for one scale-up (pod created, then ready): each write is a change.
	got := delta(before, writesSoFar(t))
	if got["EndpointSlice"] == 0 || int(got["EndpointSlice"])%2 != 0 || len(got) != 1 {
		t.Errorf("writes for one source change: %v, want only EndpointSlice writes, one per consumption cluster (2) per source slice write", got)
	}

	stop()
	before = writesSoFar(t)
	runStoppable(t, ns)
	settle()
	labtest.Eventually(t, wait, converged(2))
	if got := delta(before, writesSoFar(t)); len(got) != 0 {
		t.Errorf("writes after a restart over an unchanged world: %v, want none", got)
	}
}

// settle waits for the informers' last events to be synced: long enough
// for any write still due to happen.
func settle() { time.Sleep(3 * time.Second) }
