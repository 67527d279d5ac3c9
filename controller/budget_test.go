package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
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
	if c == nil || !strings.Contains(c.Message, "member1 changes its EndpointSlices faster than --member-change-rate") {
		t.Errorf("EndpointSliceCollected %+v, want it to say member1 is paced", c)
	}
	fc.Step(pacedFor + time.Second)
	f.sync("demo/foo")
	if c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceCollected); strings.Contains(c.Message, "faster") {
		t.Errorf("EndpointSliceCollected %q still says member1 is paced a minute later", c.Message)
	}
}
