package shards

import (
	"context"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// lease is a hub Lease of a replica counting count shards (0: one that
// did not say), held by holder ("": released), renewed at renewed.
func lease(name string, count int, holder string, renewed time.Time) *coordv1.Lease {
	l := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: name},
		Spec: coordv1.LeaseSpec{
			HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(int32(15)), RenewTime: ptr.To(metav1.NewMicroTime(renewed)),
		},
	}
	if count > 0 {
		l.Labels = map[string]string{LabelShards: strconv.Itoa(count)}
	}
	return l
}

// A replica of 4 shards may sync shard 2 only while no Lease of another
// count whose buckets overlap it is held: shard 0 of 2 does (even
// buckets), shard 1 of 2 does not, the single Lease of 1 shard and a
// Lease that says no count may; Leases of 4 shards are exclusive by
// election already, and a released Lease holds nothing. A held Lease
// stops holding once not renewed for its duration, as first seen here.
func TestOverlappingLeases(t *testing.T) {
	hub := k8sfake.NewClientset(
		lease("mcs-controller-shard-0", 2, "old-a", t0),
		lease("mcs-controller-shard-1", 2, "old-b", t0),
		lease("mcs-controller-shard-3", 4, "new-b", t0),
		lease("mcs-controller", 1, "", t0),
		lease("other", 0, "someone", t0),
	)
	e := &Elector{Shards: 4, Client: hub, Namespace: "mcs-system", LeaseDuration: 15 * time.Second}
	seen := map[string]observed{}
	held := func(at time.Time) []string {
		t.Helper()
		got, err := e.overlapping(t.Context(), 2, seen, at)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := held(t0); !slices.Equal(got, []string{"mcs-controller-shard-0"}) {
		t.Errorf("held at first: %v, want shard 0 of 2 alone", got)
	}
	if got := held(t0.Add(14 * time.Second)); len(got) != 1 {
		t.Errorf("held 14 s later, not renewed: %v, want shard 0 of 2 still", got)
	}
	renew := lease("mcs-controller-shard-0", 2, "old-a", t0.Add(14*time.Second))
	if _, err := hub.CoordinationV1().Leases("mcs-system").Update(t.Context(), renew, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := held(t0.Add(20 * time.Second)); len(got) != 1 {
		t.Errorf("held after a renewal: %v, want shard 0 of 2", got)
	}
	if got := held(t0.Add(35 * time.Second)); len(got) != 0 {
		t.Errorf("held 15 s after the renewal was seen: %v, want none", got)
	}
	for _, l := range []*coordv1.Lease{lease("mcs-controller", 1, "single", t0), lease("mcs-controller-shard-1", 0, "before-counts", t0)} {
		if _, err := hub.CoordinationV1().Leases("mcs-system").Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := held(t0.Add(36 * time.Second)); !slices.Equal(got, []string{"mcs-controller", "mcs-controller-shard-1"}) {
		t.Errorf("held with a single replica's Lease and one that says no count: %v, want both", got)
	}
}

// fence returns once the overlapping Lease ends, paced by the clock, and
// at once when nothing overlaps.
func TestFenceWaitsForTheOtherCount(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	hub := k8sfake.NewClientset(lease("mcs-controller-shard-0", 2, "old-a", t0))
	var lists atomic.Int32
	hub.PrependReactor("list", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		lists.Add(1)
		return false, nil, nil
	})
	e := &Elector{Shards: 4, Client: hub, Namespace: "mcs-system", LeaseDuration: 15 * time.Second, RetryPeriod: time.Second, Clock: fc}
	if err := e.fence(t.Context(), 1); err != nil {
		t.Fatalf("shard 1 of 4, which shares no bucket with shard 0 of 2: %v", err)
	}
	lists.Store(0)
	done := make(chan error, 1)
	go func() { done <- e.fence(t.Context(), 2) }()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return lists.Load() > 0, nil
	})
	if err != nil {
		t.Fatal("the fence never listed the Leases")
	}
	fc.Step(14 * time.Second)
	for lists.Load() < 2 {
		goruntime.Gosched() // until it has looked again
	}
	select {
	case err := <-done:
		t.Fatalf("shard 2 of 4 fenced through while shard 0 of 2 is held: %v", err)
	default:
	}
	fc.Step(2 * time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // a bound on a hang, not a measure
		t.Fatal("the fence never ended once shard 0 of 2 was not renewed for its duration")
	}
}
