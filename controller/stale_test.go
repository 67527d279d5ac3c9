package controller

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// A provider unreachable for as long as its Lease lasts is stale for the
// VIP too: its imported endpoints are not ready in every consumer while
// another provider's are, and once it is back they are what it really
// holds.
func TestStaleProviderLeavesTheVIP(t *testing.T) {
	const staleAfter = 100 * time.Millisecond
	f := newFixture(t, twoProviders(), withOptions(Options{StaleAfter: staleAfter}))
	f.sync("demo/foo")

	f.setDown(m1, true)
	// member2's export is pending, since member1 consumes it too.
	pending := []string{"update serviceexports/status demo/foo"}
	expect(t, "unreachable, not yet stale", f.sync("demo/foo"), writes{m2: pending})
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.member(m1).UnhealthyFor() >= staleAfter, nil
	})
	if err != nil {
		t.Fatal("member1 never became stale")
	}
	mark := []string{"update endpointslices demo/imported-member1-foo-1"}
	expect(t, "stale", f.sync("demo/foo"), writes{m2: mark, m3: mark})
	s := f.sliceOf(m3, "imported-member1-foo-1")
	if c := s.Endpoints[0].Conditions; ptr.Deref(c.Ready, true) || !ptr.Deref(c.Serving, false) || s.Annotations[api.AnnotationStale] == "" {
		t.Errorf("member1's endpoint in member3: %+v, annotations %v; want not ready, serving, annotated", c, s.Annotations)
	}
	if c := f.sliceOf(m3, "imported-member2-foo-2").Endpoints[0].Conditions; !ptr.Deref(c.Ready, true) {
		t.Errorf("member2's endpoint in member3 is not ready: %+v", c)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})

	// Back, with what changed meanwhile: imported as it is.
	f.change(m1, slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.2"), "update")
	f.setDown(m1, false)
	awaitSynced(t, f, m1)
	back := []string{"update endpointslices demo/imported-member1-foo-1", "update serviceexports/status demo/foo"}
	expect(t, "back", f.sync("demo/foo"), writes{m1: back[:1], m2: back, m3: back[:1]})
	s = f.sliceOf(m3, "imported-member1-foo-1")
	if len(s.Endpoints) != 2 || !ptr.Deref(s.Endpoints[0].Conditions.Ready, true) || s.Annotations[api.AnnotationStale] != "" {
		t.Errorf("member1's slice in member3 after it is back: %+v %v, want its two ready endpoints", s.Endpoints, s.Annotations)
	}
}

// awaitSynced waits until member is healthy and its informers watch: a
// change made before would be lost to them if it is a delete (informed).
func awaitSynced(t *testing.T, f *fixture, member string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.member(member).Healthy() && f.informed.watching(member), nil
	})
	if err != nil {
		t.Fatalf("%s never became healthy, its informers watching", member)
	}
}

// A quiet service's endpoints are marked once their provider has been
// unhealthy for the Lease's duration, also when an earlier add of the key
// was pending then (a retry backing off, another change): client-go's
// delaying queue keeps only the earlier of two, and every sync asks again
// for the time left. The clock is a fake one, stepped by the test.
func TestStaleMarkingAlwaysFires(t *testing.T) {
	const staleAfter = 20 * time.Second
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, twoProviders(), withOptions(Options{StaleAfter: staleAfter, Clock: fc}))
	f.sync("demo/foo")
	queued(f.c, "") // empty the queue

	f.c.queue.AddAfter("demo/foo", time.Second) // pending before member1 stops
	f.setDown(m1, true)
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatal("member1 unreachable: demo/foo not queued")
	}
	expect(t, "unreachable, not yet stale", f.sync("demo/foo"), writes{m2: {"update serviceexports/status demo/foo"}})

	fc.Step(time.Second)
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatal("the add pending before member1 stopped never came")
	}
	expect(t, "a second later", f.sync("demo/foo"), writes{})

	fc.Step(staleAfter - time.Second - time.Millisecond)
	expect(t, "just before it would be stale", f.sync("demo/foo"), writes{})
	queued(f.c, "") // what its echoes queued
	fc.Step(time.Millisecond)
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatal("member1 stale: demo/foo not queued")
	}
	mark := []string{"update endpointslices demo/imported-member1-foo-1"}
	expect(t, "stale", f.sync("demo/foo"), writes{m2: mark, m3: mark})
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// While a MultiClusterService's spec is invalid, its last valid spec is
// followed: a provider of that spec that goes down then is marked stale
// on time, as it would be under a valid spec.
func TestStaleMarkedWhileTheSpecIsInvalid(t *testing.T) {
	const staleAfter = 20 * time.Second
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1, m2}, []v1alpha1.ClusterName{m3}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1(), service("foo", false, t0), slice("foo", "foo-2", 1, "10.2.0.1")},
		m3:  {ns1()},
	}, withOptions(Options{StaleAfter: staleAfter, Clock: fc}))
	f.sync("demo/foo")
	f.change(hub, multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1, m2}, []v1alpha1.ClusterName{"member33"}, true), "update")
	f.sync("demo/foo")
	queued(f.c, "") // empty the queue

	f.setDown(m1, true)
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatal("member1 unreachable: demo/foo not queued")
	}
	f.sync("demo/foo")
	queued(f.c, "") // what its echoes queued
	fc.Step(staleAfter)
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatal("member1 stale while the spec is invalid: demo/foo not queued")
	}
	got := f.sync("demo/foo")
	delete(got, hub) // the status says member1 cannot be reached
	expect(t, "stale", got, writes{m3: {"update endpointslices demo/imported-member1-foo-1"}})
}

// A restart remembers who is stale: the marks a provider's imported
// slices carry outlive the process that made them, so a controller
// started while that provider is still away keeps them, rather than count
// its absence from its own start and send traffic to it meanwhile. They go
// once it is back, or once no other provider has a ready endpoint.
func TestRestartKeepsStaleMarks(t *testing.T) {
	const staleAfter = 20 * time.Second
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, twoProviders(), withOptions(Options{StaleAfter: staleAfter, Clock: fc}))
	f.sync("demo/foo")
	f.setDown(m1, true)
	f.sync("demo/foo")
	fc.Step(staleAfter)
	mark := []string{"update endpointslices demo/imported-member1-foo-1"}
	expect(t, "stale", f.sync("demo/foo"), writes{m2: mark, m3: mark})

	f.restart()
	// The imports' status.clusters no longer name member1, which this
	// process has not read.
	status := []string{"update serviceimports/status demo/foo"}
	expect(t, "restarted, member1 still away", f.sync("demo/foo"), writes{m2: status, m3: status})
	fc.Step(staleAfter)
	expect(t, "stale to the new process too", f.sync("demo/foo"), writes{})

	// member2's only endpoint goes: member1's, stale, are all there is.
	f.change(m2, slice("foo", "foo-2", 2), "update")
	unmark := []string{"update endpointslices demo/imported-member2-foo-2", "update endpointslices demo/imported-member1-foo-1"}
	expect(t, "no other ready endpoint", f.sync("demo/foo"), writes{m2: unmark, m3: unmark})
	if s := f.sliceOf(m3, "imported-member1-foo-1"); s.Annotations[api.AnnotationStale] != "" || !ptr.Deref(s.Endpoints[0].Conditions.Ready, true) {
		t.Errorf("member1's slice in member3 once no other is ready: %v %+v, want unmarked and ready", s.Annotations, s.Endpoints[0].Conditions)
	}
}

// twoProviders is foo exported by member1 and member2, member3 consuming.
func twoProviders() world {
	return world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1(), service("foo", false, t0), slice("foo", "foo-2", 1, "10.2.0.1"), export("foo", t0)},
		m3: {ns1()},
	}
}
