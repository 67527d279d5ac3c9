package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// A member whose API server hangs on writes holds a sync up for
// memberWait once, and no sync after that: the other members are written
// at once, the hung one is not written again while its writes are under
// way, and the service is synced again once they end. The clock is a fake
// one, stepped past memberWait once the sync waits for member3 alone.
func TestHungMemberSlowsNoOne(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{Clock: fc}))
	release := hangWrites(f, m3)

	all := firstImport("foo", "imported-member1-foo-1")
	expect(t, "member3 hangs", syncPastWait(f, fc, "demo/foo", m3), writes{m1: append(slices.Clone(all), "update serviceexports/status demo/foo"), m2: all})
	f.change(m1, slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.2"), "update")
	one := []string{"update endpointslices demo/imported-member1-foo-1"}
	// The clock no longer moves: a sync that waited would never end.
	expect(t, "a change, member3's writes under way", syncUnbounded(t, f, "demo/foo"), writes{m1: one, m2: one})
	requeuedOnRelease(t, f, "demo/foo", release, "the service was not queued again once member3's writes ended")
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		syncUnbounded(t, f, "demo/foo")
		s, err := f.kube[m3].DiscoveryV1().EndpointSlices(ns).Get(t.Context(), "imported-member1-foo-1", metav1.GetOptions{})
		return err == nil && len(s.Endpoints) == 2, nil
	})
	if err != nil {
		t.Error("member3 never got the change once its writes went through")
	}
}

// What writes no sync waited for did is reported by no later sync either:
// it was done for a plan that may have changed since. While the member's
// writes are late the conditions say it is slow; once it is not, they say
// what a sync that waited for it found.
func TestLateResultsReportedByNoLaterSync(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, nil, nil, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
		m3:  {ns1()},
	}, withOptions(Options{Clock: fc}))
	var fail atomic.Bool // once the hung writes go on, they fail
	fail.Store(true)
	f.kube[m3].PrependReactor("create", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		return fail.Load(), nil, errors.New("the webhook refused it")
	})
	release := hangWrites(f, m3)
	syncPastWait(f, fc, "demo/foo", m3)
	applied := func() metav1.Condition {
		return *meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceApplied)
	}
	if c := applied(); c.Status != metav1.ConditionTrue {
		t.Errorf("EndpointSliceApplied once member3's writes took memberWait: %s %q, want True until they are late", c.Reason, c.Message)
	}
	pastLate(t, f, fc, m3)
	syncUnbounded(t, f, "demo/foo")
	if c := applied(); c.Reason != reasonMemberSlow || !strings.Contains(c.Message, m3) {
		t.Errorf("EndpointSliceApplied while member3 hangs: %s %q, want %s naming member3", c.Reason, c.Message, reasonMemberSlow)
	}
	requeuedOnRelease(t, f, "demo/foo", release, "the service was not queued again once member3's writes ended")
	waitLanded(t, f, "demo/foo", m3)
	fail.Store(false)
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		syncUnbounded(t, f, "demo/foo")
		waitLanded(t, f, "demo/foo", m3)
		if c := applied(); strings.Contains(c.Message, "refused") {
			t.Fatalf("a later sync reported the failure of writes it did not start: %s %q", c.Reason, c.Message)
		}
		return applied().Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Errorf("EndpointSliceApplied never True once member3's writes went through: %+v", applied())
	}
}

// A service whose import in a slow member is current is not reported
// slow there: the sync finds nothing to write, which takes no write, so
// it waits for that finding rather than say the member's writes go on.
func TestNothingToWriteIntoASlowMember(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, nil, true),
			multiClusterService("bar", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, nil, true)},
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2")},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{Clock: fc}))
	f.sync("demo/bar")
	f.change(m1, slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.3"), "update")
	release := hangWrites(f, m3)
	defer close(release)
	syncPastWait(f, fc, "demo/foo", m3)
	pastLate(t, f, fc, m3)

	expect(t, "bar, imported everywhere", syncUnbounded(t, f, "demo/bar"), writes{})
	if c := meta.FindStatusCondition(f.mcsOf("bar").Status.Conditions, v1alpha1.EndpointSliceApplied); c.Status != metav1.ConditionTrue {
		t.Errorf("bar's EndpointSliceApplied while member3 hangs on foo's writes: %s %q, want True: bar's import there is current", c.Reason, c.Message)
	}
}

// syncPastWait is f.sync of key while hung's writes hang: once the sync
// waits for them alone, the fake clock steps past memberWait, which ends
// that wait at once and no other.
func syncPastWait(f *fixture, fc *clocktesting.FakeClock, key, hung string) map[string][]string {
	f.t.Helper()
	f.c.fan.waitsFor = func(k string, waiting map[string]bool) {
		if k == key && len(waiting) == 1 && waiting[hung] {
			fc.Step(memberWait)
		}
	}
	defer func() { f.c.fan.waitsFor = nil }()
	return f.sync(key)
}

// pastLate steps the clock past memberLate, and waits until cluster's
// writes under way count as late.
func pastLate(t *testing.T, f *fixture, fc *clocktesting.FakeClock, cluster string) {
	t.Helper()
	fc.Step(memberLate)
	f.await(cluster+"'s writes count as late", func() bool { return f.c.perMember.of(cluster).late.Load() > 0 })
}

// syncUnbounded is f.sync for a sync that must not wait for a slow
// member: the clock does not move, so that one would hang, which this
// bounds. The bound is on the sync alone: the wait for the caches to hold
// its writes, which a loaded machine may make long, is f.sync's own.
func syncUnbounded(t *testing.T, f *fixture, key string) map[string][]string {
	t.Helper()
	f.writes()
	done := make(chan error, 1)
	go func() { done <- f.c.sync(context.Background(), key) }()
	select {
	case err := <-done:
		f.checkSyncError(key, "", err)
	case <-time.After(10 * time.Second): // a bound on a hang, not a measure
		t.Fatalf("the sync of %s waited for a slow member", key)
	}
	return f.settled()
}

// waitLanded waits until cluster's writes of key have ended.
func waitLanded(t *testing.T, f *fixture, key, cluster string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, busy := f.c.fan.flights.Load(flight{cluster, key})
		return !busy, nil
	})
	if err != nil {
		t.Fatalf("%s's writes of %s never ended", cluster, key)
	}
}

// A member's slots bound the services whose writes are under way there: a
// service that finds none free is deferred, and queued again once one
// frees; the other members are written meanwhile.
func TestMemberSlotsBoundWrites(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0),
			service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2"), export("bar", t0)},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{Clock: fc}))
	f.c.fan.slots = newSlots(1)
	release := hangWrites(f, m3)

	syncPastWait(f, fc, "demo/foo", m3) // member3's one slot: foo's writes, hung
	bar := firstImport("bar", "imported-member1-bar-1")
	expect(t, "bar, no slot free in member3", syncUnbounded(t, f, "demo/bar"), writes{m1: append(slices.Clone(bar), "update serviceexports/status demo/bar"), m2: bar})
	if _, ok := f.c.fan.flights.Load(flight{m3, "demo/bar"}); ok {
		t.Error("bar's writes are under way in member3, whose one slot foo's hold")
	}
	requeuedOnRelease(t, f, "demo/bar", release, "bar was not queued again once member3's slot freed")
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		syncUnbounded(t, f, "demo/foo")
		syncUnbounded(t, f, "demo/bar")
		client := f.kube[m3].DiscoveryV1().EndpointSlices(ns)
		_, errFoo := client.Get(t.Context(), "imported-member1-foo-1", metav1.GetOptions{})
		_, errBar := client.Get(t.Context(), "imported-member1-bar-1", metav1.GetOptions{})
		return errFoo == nil && errBar == nil, nil
	})
	if err != nil {
		t.Error("member3 never got both services")
	}
}

// hangWrites makes cluster's writes hang until the returned channel is
// closed, as an API server whose webhook never answers.
func hangWrites(f *fixture, cluster string) chan struct{} {
	release := make(chan struct{})
	hang := func(a clienttesting.Action) (bool, runtime.Object, error) {
		if slices.Contains([]string{"create", "update", "delete"}, a.GetVerb()) {
			<-release
		}
		return false, nil, nil
	}
	f.kube[cluster].PrependReactor("*", "*", hang)
	f.mcs[cluster].PrependReactor("*", "*", hang)
	return release
}

// requeuedOnRelease drops what the syncs queued so far, releases the hung
// writes, and fails unless key is queued again then.
func requeuedOnRelease(t *testing.T, f *fixture, key string, release chan struct{}, msg string) {
	t.Helper()
	for queued(f.c, key) {
	}
	close(release)
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, key), nil
	})
	if err != nil {
		t.Fatal(msg)
	}
}

// What a member's deferred keys grew is let go once none waits.
func TestSlotsLetGoOfWhatWaited(t *testing.T) {
	s := newSlots(1)
	for i := range 101 {
		s.take(flight{m1, fmt.Sprintf("demo/s%d", i)})
	}
	// Each key given back is synced again, and takes the slot it freed.
	for {
		key, ok := s.give(m1)
		if !ok {
			break
		}
		if !s.take(flight{m1, key}) {
			t.Fatalf("%s found no slot when one was given back for it", key)
		}
	}
	if len(s.deferred) != 0 || len(s.waiting) != 0 || s.busy[m1] != 0 {
		t.Errorf("after every slot was given back: deferred %d members, waiting %d keys, %d busy; want none", len(s.deferred), len(s.waiting), s.busy[m1])
	}
}

// What the controller noted of a member that left goes with it.
func TestLeftMemberForgotten(t *testing.T) {
	f := newFixture(t, world{})
	for _, cluster := range []string{"member9", m1} {
		st := f.c.perMember.of(cluster)
		st.slow.Store(true)
		st.pruned.Store(&prunedFields{status: true})
	}
	f.c.memberChanged("member9") // not registered: it left
	var slow, pruned []string
	f.c.perMember.by.Range(func(cluster string, st *memberState) bool {
		if st.slow.Load() {
			slow = append(slow, cluster)
		}
		if st.pruned.Load() != nil {
			pruned = append(pruned, cluster)
		}
		return true
	})
	for name, left := range map[string][]string{"slow": slow, "prunedFields": pruned} {
		if !slices.Equal(left, []string{m1}) {
			t.Errorf("%s holds entries of %v, want member1's alone", name, left)
		}
	}
}

// A sync waiting for a member's writes stops waiting once its service
// changes again: the queue holds the change until that sync ends, which
// would hold it back from every other member for memberWait. The clock is
// a fake one that never reaches memberWait.
func TestChangeNotHeldBackByAHungMember(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{Clock: fc}))
	release := hangWrites(f, m3)
	defer close(release)
	synced := make(chan error, 1)
	go func() { synced <- f.c.sync(t.Context(), "demo/foo") }()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, m1Busy := f.c.fan.flights.Load(flight{m1, "demo/foo"})
		_, m3Busy := f.c.fan.flights.Load(flight{m3, "demo/foo"})
		return !m1Busy && m3Busy, nil
	})
	if err != nil {
		t.Fatal("the first sync never waited for member3")
	}

	// The change, as kube-controller-manager writes it: f.change would
	// wait for the first sync's writes too.
	changed := slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.2")
	if _, err := f.kube[m1].DiscoveryV1().EndpointSlices(ns).Update(t.Context(), changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-synced:
		if err != nil {
			t.Errorf("first sync: %v", err)
		}
	case <-time.After(10 * time.Second): // a bound on a hang, not a measure
		t.Fatal("the first sync went on waiting for member3 after the service changed")
	}
	// member1's export status may follow too: the first sync reported
	// what it had when the change ended its wait.
	one := []string{"update endpointslices demo/imported-member1-foo-1"}
	err = wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		_, m1Busy := f.c.fan.flights.Load(flight{m1, "demo/foo"})
		_, m2Busy := f.c.fan.flights.Load(flight{m2, "demo/foo"})
		return !m1Busy && !m2Busy, nil
	})
	if err != nil {
		t.Fatal("the first sync's writes into member1 and member2 never ended")
	}
	for cluster, actions := range f.writes() {
		for _, a := range actions {
			f.awaitCached(cluster, a)
		}
	}
	got := f.sync("demo/foo")
	if !slices.Equal(got[m2], one) || !slices.Contains(got[m1], one[0]) || len(got[m3]) > 0 {
		t.Errorf("the change wrote %v, want the slice update into member1 and member2, nothing into member3", got)
	}
}

// The delivery of a source change the sync already read ends no wait: an
// informer calls its handlers after its cache has the change, so the sync
// may have read it first. A newer version, or another slice, does.
func TestOnlyANewerSourceEndsTheWait(t *testing.T) {
	c := &fanout{perService: &serviceStates{}}
	read := slice("foo", "foo-1", 1, "10.1.0.1")
	read.ResourceVersion = "5"
	for _, tc := range []struct {
		name, slice, rv string
		ends            bool
	}{
		{"the change read", "foo-1", "5", false},
		{"a newer one", "foo-1", "6", true},
		{"another slice", "foo-2", "5", true},
	} {
		done := c.readSources("demo/foo", &desired.Input{Members: map[string]desired.Member{m1: {Slices: []*discoveryv1.EndpointSlice{read}}}})
		r := c.perService.get("demo/foo").reading
		delivered := slice("foo", tc.slice, 1)
		delivered.ResourceVersion = tc.rv
		c.sourceChanged("demo/foo", m1, delivered)
		select {
		case <-r.changed:
			if !tc.ends {
				t.Errorf("%s ended the wait", tc.name)
			}
		default:
			if tc.ends {
				t.Errorf("%s did not end the wait", tc.name)
			}
		}
		done()
	}
	if c.perService.get("demo/foo").reading != nil {
		t.Error("what the sync read is kept after it ended")
	}
}

// A slow member stays slow until a write of its is answered within
// memberWait: writes that wrote nothing there (a service it takes no part
// in) say nothing of it, so no later sync waits for it again while its
// writes still hang, and the conditions do not flap. Once its writes are
// answered, it is not slow.
func TestSlowUntilAWriteIsAnswered(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	f := newFixture(t, world{
		hub: {multiClusterService("baz", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0),
			service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2"), export("bar", t0),
			service("baz", false, t0), slice("baz", "baz-1", 1, "10.1.0.3")},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{Clock: fc}))
	release := hangWrites(f, m3)
	syncPastWait(f, fc, "demo/foo", m3)
	pastLate(t, f, fc, m3)

	// baz writes nothing into member3: its flight there ends at once.
	syncUnbounded(t, f, "demo/baz")
	waitLanded(t, f, "demo/baz", m3)
	if !f.c.fan.slow(m3) {
		t.Fatal("member3 is no longer slow after a sync that wrote nothing there, while its writes hang")
	}
	// bar's writes into member3 hang too: the sync does not wait for them.
	syncUnbounded(t, f, "demo/bar")
	if c := meta.FindStatusCondition(f.exportOf(m1, "bar").Status.Conditions, "Ready"); c == nil || c.Reason != "Pending" {
		t.Errorf("member1's export of bar while member3 hangs: %+v, want Ready Pending", c)
	}

	requeuedOnRelease(t, f, "demo/foo", release, "foo was not queued again once member3's writes ended")
	waitLanded(t, f, "demo/foo", m3)
	waitLanded(t, f, "demo/bar", m3)
	syncUnbounded(t, f, "demo/foo") // answered at once now
	if f.c.fan.slow(m3) {
		t.Error("member3 is still slow after its writes were answered at once")
	}
}
