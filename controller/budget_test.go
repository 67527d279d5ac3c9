package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// A member that changes its slices faster than --member-change-rate has
// its services synced as its budget allows, each once however often it
// changes meanwhile, and the MultiClusterService says so.
func TestMemberChangesPaced(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, nil, nil, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	}, withOptions(Options{Clock: fc, ChangeRate: 1}))
	f.sync("demo/foo")
	// The member's events of the start spent some of its budget: it is
	// full again.
	fc.Step(changeBurst * time.Second)
	gen := int64(1)
	change := func() (paced bool) {
		t.Helper()
		for queued(f.c, "demo/foo") {
		}
		before := testutil.ToFloat64(changesPaced.WithLabelValues(m1))
		gen++
		f.change(m1, slice("foo", "foo-1", gen, "10.1.0.1"), "update")
		err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			paced = testutil.ToFloat64(changesPaced.WithLabelValues(m1)) > before
			return paced || queued(f.c, "demo/foo"), nil
		})
		if err != nil {
			t.Fatalf("change %d was neither queued nor paced", gen)
		}
		return paced
	}
	for !change() {
		if gen > 2*changeBurst {
			t.Fatalf("%d changes at once, none paced", gen)
		}
	}
	if gen < changeBurst {
		t.Errorf("paced after %d changes, want a burst of %d at once", gen, changeBurst)
	}
	// Waiting, the service is queued once: later changes add nothing.
	before := testutil.ToFloat64(changesPaced.WithLabelValues(m1))
	f.change(m1, slice("foo", "foo-1", gen+1, "10.1.0.1"), "update")
	if queued(f.c, "demo/foo") || testutil.ToFloat64(changesPaced.WithLabelValues(m1)) != before {
		t.Error("a change of a service waiting for its budget queued it again")
	}
	// The queue's delaying loop may set its timer from the clock read
	// before a step: stepping in small steps until the key is queued
	// passes the budget's wait either way.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		if queued(f.c, "demo/foo") {
			return true, nil
		}
		fc.Step(50 * time.Millisecond)
		return false, nil
	})
	if err != nil {
		t.Fatal("the paced service was not queued once its budget allowed")
	}
	f.sync("demo/foo")
	c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceCollected)
	if c == nil || !strings.Contains(c.Message, "member1 changes its EndpointSlices, Services, ServiceExports or ServiceImports faster than --member-change-rate") {
		t.Errorf("EndpointSliceCollected %+v, want it to say member1 is paced", c)
	}
	fc.Step(pacedFor + time.Second)
	f.sync("demo/foo")
	if c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceCollected); strings.Contains(c.Message, "faster") {
		t.Errorf("EndpointSliceCollected %q still says member1 is paced a minute later", c.Message)
	}
}

// A member that flaps its ServiceExports or Services queues its services
// no faster than its budget (--member-change-rate) allows, as one that
// flaps its slices does: a burst's worth at once, the others once the
// budget allows, each then, none lost.
func TestMemberObjectsPaced(t *testing.T) {
	const services, rate, burst = 3 * changeBurst, 1, changeBurst
	name := func(i int) string { return fmt.Sprintf("svc-%d", i) }
	// Services are queued when something multi-cluster is asked of them:
	// the hub's MultiClusterServices, whose changes no budget paces.
	var mcses []runtime.Object
	for i := range services {
		mcses = append(mcses, multiClusterService(name(i), api.RemoteAndLocal, nil, nil, true))
	}
	for _, step := range []struct {
		kind   string
		world  world
		change func(i int) runtime.Object
	}{
		{"ServiceExports", world{m1: {ns1()}}, func(i int) runtime.Object { return export(name(i), t0) }},
		{"Services", world{hub: mcses, m1: {ns1()}}, func(i int) runtime.Object { return service(name(i), false, t0) }},
	} {
		t.Run(step.kind, func(t *testing.T) {
			fc := clocktesting.NewFakeClock(t0)
			f := newFixture(t, step.world, withOptions(Options{Clock: fc, ChangeRate: rate}))
			got := map[string]bool{}
			// What the hub's MultiClusterServices queued is out of the way.
			if err := f.drainUntil(fc, got, 10*time.Second, func() bool { return len(got) == len(step.world[hub]) }, 0); err != nil {
				t.Fatalf("%d services queued by the hub, want %d", len(got), len(step.world[hub]))
			}
			clear(got)
			paced := func() int { return int(testutil.ToFloat64(changesPaced.WithLabelValues(m1))) }
			before, start := paced(), fc.Now()
			for i := range services {
				f.change(m1, step.change(i), "create")
			}
			if err := f.drainUntil(fc, got, 10*time.Second, func() bool { return len(got)+paced()-before >= services }, 0); err != nil {
				t.Fatalf("of %d services changed, %d queued and %d paced", services, len(got), paced()-before)
			}
			if len(got) > burst*rate || paced()-before != services-burst*rate {
				t.Errorf("of %d services changed, %d queued at once and %d paced; want %d and %d", services, len(got), paced()-before, burst*rate, services-burst*rate)
			}
			if err := f.drainUntil(fc, got, 10*time.Second, func() bool { return len(got) == services }, 100*time.Millisecond); err != nil {
				t.Fatalf("%d of %d services queued once the budget allowed", len(got), services)
			}
			if took, want := fc.Since(start), (services-burst*rate)/rate*time.Second; took < want {
				t.Errorf("every service queued %s after the changes, want %s at least", took, want)
			}
		})
	}
}
