package members

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsapifake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// fakeMember is member1 over fake clientsets that serve the MCS API's
// v1beta1, as a member that answers.
func fakeMember(t *testing.T) *Member {
	// mcs-api's fake cannot stream a list to an informer.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	kube := k8sfake.NewSimpleClientset()
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: mcsv1b1.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{
		{Name: mcsapi.ServiceExports, Namespaced: true}, {Name: mcsapi.ServiceImports, Namespaced: true},
	}}}
	return New("member1", "fake member1", kube, mcsapifake.NewSimpleClientset())
}

// A member counts as unhealthy from the probe that found it so, not from
// the probe before, which it passed on the grace of failureThreshold: its
// Leases were renewed until then, and marking its endpoints stale before
// they expire would cut it off before coredns-mcs does.
func TestUnhealthyFromTheProbeThatFoundIt(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := fakeMember(t)
	m.clock, m.lastHealthy = fc, fc.Now()
	none := func(string, any) {}
	h := Handlers{Services: none, Slices: none, Exports: none, Imports: none}
	var down error
	ready := func(context.Context, *Member) error { return down }
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	m.probe(ctx, h, ready) // starts the informers
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return m.Synced(), nil }); err != nil {
		t.Fatal("never synced")
	}
	m.probe(ctx, h, ready)
	if !m.Healthy() {
		t.Fatalf("not healthy: %v", m.Err())
	}
	down = errors.New("dial tcp: connection refused")
	fc.Step(5 * time.Second)
	m.probe(ctx, h, ready)
	if !m.Healthy() {
		t.Fatal("unhealthy after one failed probe, want the grace of failureThreshold")
	}
	fc.Step(5 * time.Second)
	m.probe(ctx, h, ready)
	if m.Healthy() {
		t.Fatal("healthy after two failed probes")
	}
	fc.Step(20 * time.Second)
	m.probe(ctx, h, ready)
	if got := m.UnhealthyFor(); got != 20*time.Second {
		t.Errorf("unhealthy for %s, want 20s: since the probe that found it so", got)
	}
}

// The member's informers go through one state machine (lifecycle.go):
// whatever overflows, swaps or is cut off at once, the member never holds
// caches that were stopped, an overflow takes every caches of it out, and
// none are put in place past an overflow until it is retried.
func TestCacheLifecycleRacingOverflow(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m := fakeMember(t)
	m.clock = fc
	v := mcsv1b1.SchemeGroupVersion
	none := func(string, any) {}
	h := Handlers{Services: none, Slices: none, Exports: none, Imports: none}
	ctx := t.Context()
	made := func() *caches {
		t.Helper()
		c, err := newCaches(ctx, m, v, v)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	stopped := func(c *caches) bool {
		select {
		case <-c.done:
			return true
		default:
			return false
		}
	}
	for i := range 50 {
		fc.Step(overflowRetry + time.Second) // the last round's overflow is retried
		m.lifecycle()
		m.mu.Lock()
		if m.caches != nil { // what the last round left serving
			m.caches.stop()
		}
		m.caches = nil
		m.mu.Unlock()
		old := made()
		if err := m.install(old, v, v); err != nil {
			t.Fatal(err)
		}
		fresh, err := m.freshCaches(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { m.swap(fresh, h) })
		wg.Go(func() { m.overflow([]*caches{old, fresh}[i%2], "more than it may") }) // either may overflow
		if i%3 == 0 {
			wg.Go(m.cutOffNow)
		}
		wg.Wait()

		m.mu.Lock()
		current, pending, over := m.caches, m.fresh, m.overflowErr
		m.mu.Unlock()
		for _, c := range []*caches{current, pending} {
			if c != nil && stopped(c) {
				t.Fatalf("round %d: the member holds stopped caches", i)
			}
		}
		overflowed := []*caches{old, fresh}[i%2]
		if over == nil {
			// Only caches already taken out (swapped, or cut off) may
			// overflow without effect.
			if !stopped(overflowed) || current == nil {
				t.Fatalf("round %d: the overflow of caches in place was lost", i)
			}
			continue
		}
		if current != nil || pending != nil {
			t.Fatalf("round %d: caches are left in place after an overflow", i)
		}
		if !stopped(old) || !stopped(fresh) {
			t.Fatalf("round %d: caches taken out by an overflow still run", i)
		}
		if err := m.install(made(), v, v); err == nil {
			t.Fatalf("round %d: caches put in place before the overflow is retried", i)
		}
	}
}

// A member deregistered while healthy retires; once it can no longer be
// reached it is let go, as one unreachable when deregistered is at once,
// rather than hold its name (and every deleting MultiClusterService's
// finalizer) until it is back.
func TestRetiringMemberThatGoesAwayIsLetGo(t *testing.T) {
	m := fakeMember(t)
	var down atomic.Bool
	r, err := NewRegistry(Options{Members: []*Member{m}, ProbeEvery: 10 * time.Millisecond, Ready: func(context.Context, *Member) error {
		if down.Load() {
			return errors.New("dial tcp: connection refused")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	none := func(string, any) {}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, Handlers{Services: none, Slices: none, Exports: none, Imports: none})
	}()
	defer func() { cancel(); <-done }()
	poll := func(what string, cond func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
			t.Fatal(what)
		}
	}
	poll("member1 never became healthy", m.Healthy)
	r.remove("member1", "fake member1")
	if !m.Retiring() || r.get("member1") != m {
		t.Fatal("member1 deregistered while healthy did not retire")
	}
	down.Store(true)
	poll("member1, retiring and unreachable, was never let go", func() bool { return r.get("member1") == nil })
}

// A probe exports what the controller holds of the member beside its
// bound (--member-max-objects), so that an alert compares the two; a
// member without a bound exports none.
func TestObjectsLimitExported(t *testing.T) {
	for _, limit := range []int{0, 50000} {
		m := fakeMember(t)
		m.maxObjects = limit
		none := func(string, any) {}
		h := Handlers{Services: none, Slices: none, Exports: none, Imports: none}
		ready := func(context.Context, *Member) error { return nil }
		objectsLimitGauge.Reset()
		m.probe(t.Context(), h, ready) // starts the informers
		if err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return m.Synced(), nil }); err != nil {
			t.Fatal("never synced")
		}
		m.probe(t.Context(), h, ready)
		if got := testutil.CollectAndCount(objectsLimitGauge); limit == 0 && got != 0 {
			t.Errorf("no bound: %d series of mcs_member_objects_limit, want none", got)
		} else if limit > 0 && testutil.ToFloat64(objectsLimitGauge.WithLabelValues("member1")) != float64(limit) {
			t.Errorf("mcs_member_objects_limit = %v, want %d", testutil.ToFloat64(objectsLimitGauge.WithLabelValues("member1")), limit)
		}
		m.stop()
	}
}
