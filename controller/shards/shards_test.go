package shards

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Every bucket is some shard's for any count of shards, and a replica's
// informers select an object of the controller's exactly when its
// service is of a shard wanted; others' objects, unlabelled, always.
func TestSelectorSelectsTheShardsWanted(t *testing.T) {
	for _, n := range []int{1, 2, 3, 64} {
		s := NewSet(n)
		s.Want(n - 1)
		sel, err := labels.Parse(s.Selector())
		if err != nil {
			t.Fatalf("%d shards: selector %q: %v", n, s.Selector(), err)
		}
		if !sel.Matches(labels.Set{"app": "users"}) {
			t.Errorf("%d shards: %q does not select an unlabelled object", n, s.Selector())
		}
		for i := range 200 {
			name := fmt.Sprintf("svc-%d", i)
			shard := Bucket("demo", name) % n
			if got, want := sel.Matches(labels.Set{api.LabelBucket: Label("demo", name)}), shard == n-1; got != want {
				t.Errorf("%d shards: %s of shard %d selected %t by %q", n, name, shard, got, s.Selector())
			}
			if s.Owns("demo", name) {
				t.Errorf("%d shards: %s owned before its shard is held", n, name)
			}
		}
		listed := s.Selector()
		if n > 1 {
			s.Want(0)
			if s.HoldSelected(listed) || s.Held() != 0 {
				t.Errorf("%d shards: shards held by a selector that is no longer theirs", n)
			}
			listed = s.Selector()
		}
		if !s.HoldSelected(listed) || !s.Holds(n-1) || s.Held() != min(n, 2) {
			t.Errorf("%d shards: holds %d shards, want shards 0 and %d", n, s.Held(), n-1)
		}
	}
	all := NewSet(2)
	all.Want(0)
	all.Want(1)
	if all.Selector() != "" {
		t.Errorf("every shard wanted: selector %q, want none", all.Selector())
	}
}

func TestValid(t *testing.T) {
	for n, ok := range map[int]bool{0: false, 1: true, 64: true, 65: false} {
		if err := Valid(n); (err == nil) != ok {
			t.Errorf("Valid(%d) = %v", n, err)
		}
	}
	if LeaseName(0, 1) != "mcs-controller" || LeaseName(1, 2) != "mcs-controller-shard-1" {
		t.Errorf("lease names %s, %s", LeaseName(0, 1), LeaseName(1, 2))
	}
}

// replicas run Electors on one fake hub and record the shards each takes.
type replicas struct {
	t      *testing.T
	hub    *k8sfake.Clientset
	shards int
	max    int
	wg     sync.WaitGroup
	mu     sync.Mutex
	held   map[string][]int
}

func newReplicas(t *testing.T, shards, max int) *replicas {
	r := &replicas{t: t, hub: k8sfake.NewClientset(), shards: shards, max: max, held: map[string][]int{}}
	t.Cleanup(r.wg.Wait)
	return r
}

// start runs the replica identity until the test ends or stop is called.
func (r *replicas) start(identity string) (stop func()) {
	ctx, stop := context.WithCancel(context.Background())
	r.t.Cleanup(stop)
	e := &Elector{
		Shards: r.shards, MaxHeld: r.max, Client: r.hub, Namespace: "mcs-system", Identity: identity,
		// Renewals have a second to land: the fake answers in
		// microseconds, a busy machine under -race may not run them for a
		// while.
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
		Acquired: func(i int) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.held[identity] = append(r.held[identity], i)
		},
		Lost: func(i int) { r.t.Errorf("%s lost shard %d", identity, i) },
	}
	r.wg.Go(func() { _ = e.Run(ctx) })
	return stop
}

func (r *replicas) shardsOf(identity string) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.held[identity]))
}

// await fails the test unless cond holds within 5 s.
func (r *replicas) await(what string, cond func() bool) {
	r.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.t.Fatalf("want %s; held: %v", what, r.held)
	}
}

// Two replicas started together take one shard each, whether their
// identities hash to different first shards (a, b) or the same (a, c);
// when one stops (and releases its Lease), the other takes its shard over.
func TestElectorsSplitAndTakeOver(t *testing.T) {
	for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}} {
		t.Run(pair[0]+"+"+pair[1], func(t *testing.T) { splitAndTakeOver(t, pair[0], pair[1]) })
	}
}

func splitAndTakeOver(t *testing.T, a, b string) {
	r := newReplicas(t, 2, 0)
	stopA := r.start(a)
	time.Sleep(20 * time.Millisecond)
	r.start(b)
	r.await("one shard each", func() bool {
		sa, sb := r.shardsOf(a), r.shardsOf(b)
		return len(sa) == 1 && len(sb) == 1 && sa[0] != sb[0]
	})
	// Past a lease duration, neither takes the other's.
	time.Sleep(3 * time.Second)
	if len(r.shardsOf(a)) != 1 || len(r.shardsOf(b)) != 1 {
		t.Fatalf("%s holds %v and %s %v, want one shard each still", a, r.shardsOf(a), b, r.shardsOf(b))
	}
	stopA()
	r.await(b+" holding both shards", func() bool { return len(r.shardsOf(b)) == 2 })
}

// With --max-shards 2 of 3 shards, a replica left alone keeps two, and
// the third waits for a replica that holds fewer: the one a rollout
// starts next takes it at once.
func TestElectorsStopAtMaxHeld(t *testing.T) {
	r := newReplicas(t, 3, 2)
	stopA := r.start("a")
	r.start("b")
	r.await("three shards taken, at most two each", func() bool {
		return len(r.shardsOf("a"))+len(r.shardsOf("b")) == 3
	})
	if len(r.shardsOf("a")) > 2 || len(r.shardsOf("b")) > 2 {
		t.Fatalf("a holds %v and b %v, want at most two each", r.shardsOf("a"), r.shardsOf("b"))
	}
	stopA()
	r.await("b at its maximum", func() bool { return len(r.shardsOf("b")) == 2 })
	time.Sleep(3 * time.Second) // past a lease duration
	if got := r.shardsOf("b"); len(got) != 2 {
		t.Fatalf("b holds %v, want two: its maximum", got)
	}
	r.start("c")
	r.await("c taking the shard left", func() bool { return len(r.shardsOf("c")) == 1 })
	if all := slices.Sorted(slices.Values(append(r.shardsOf("b"), r.shardsOf("c")...))); !slices.Equal(all, []int{0, 1, 2}) {
		t.Errorf("b and c hold %v, want every shard once", all)
	}
}

// Two shards taken at the same instant by a replica one short of its
// maximum: the second is given back, and the campaigns for the others end.
func TestTakeStopsAtMaxHeld(t *testing.T) {
	e := &Elector{MaxHeld: 1}
	ended := make([]bool, 3)
	for i := range ended {
		e.campaigns = append(e.campaigns, &campaign{end: func() { ended[i] = true }})
	}
	if !e.take(1) {
		t.Fatal("the first shard was refused")
	}
	if !slices.Equal(ended, []bool{true, false, true}) {
		t.Errorf("campaigns ended %v, want those of the shards not held", ended)
	}
	if e.take(2) {
		t.Error("a second shard was taken past MaxHeld 1")
	}
}

// A change of --shards runs no two writers: while a replica of 2 shards
// holds both, a replica of 4 that takes the Leases of shards 2 and 3
// (under other names, but of buckets the first holds) syncs neither;
// once the first is gone, the second takes every shard.
func TestShardCountChangeRunsNoTwoWriters(t *testing.T) {
	old := newReplicas(t, 2, 0)
	stopOld := old.start("old")
	old.await("old holding both shards", func() bool { return len(old.shardsOf("old")) == 2 })
	next := &replicas{t: t, hub: old.hub, shards: 4, held: map[string][]int{}}
	t.Cleanup(next.wg.Wait)
	next.start("new")
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		l, err := old.hub.CoordinationV1().Leases("mcs-system").Get(context.Background(), LeaseName(2, 4), metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "new", nil
	})
	if err != nil {
		t.Fatal("the replica of 4 shards never took shard 2's Lease")
	}
	time.Sleep(3 * time.Second) // past a lease duration, the first still renewing
	if got := next.shardsOf("new"); len(got) > 0 {
		t.Fatalf("the replica of 4 shards syncs %v while the replica of 2 holds every bucket", got)
	}
	stopOld()
	next.await("the replica of 4 shards holding all four", func() bool { return len(next.shardsOf("new")) == 4 })
}
