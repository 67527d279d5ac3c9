package shards

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

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

// Two replicas started together take one shard each, whether their
// identities hash to different first shards (a, b) or the same (a, c);
// when one stops (and releases its Lease), the other takes its shard over.
func TestElectorsSplitAndTakeOver(t *testing.T) {
	for _, pair := range [][2]string{{"a", "b"}, {"a", "c"}} {
		t.Run(pair[0]+"+"+pair[1], func(t *testing.T) { splitAndTakeOver(t, pair[0], pair[1]) })
	}
}

func splitAndTakeOver(t *testing.T, a, b string) {
	hub := k8sfake.NewClientset()
	var mu sync.Mutex
	held := map[string][]int{}
	elector := func(identity string) *Elector {
		return &Elector{
			Shards: 2, Client: hub, Namespace: "mcs-system", Identity: identity,
			// Renewals have a second to land: the fake answers in
			// microseconds, a busy machine under -race may not run them for
			// a while.
			LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond,
			Acquired: func(i int) {
				mu.Lock()
				defer mu.Unlock()
				held[identity] = append(held[identity], i)
			},
			Lost: func(i int) { t.Errorf("%s lost shard %d", identity, i) },
		}
	}
	ctxA, stopA := context.WithCancel(context.Background())
	ctxB, stopB := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopA()
	defer stopB()
	wg.Go(func() { _ = elector(a).Run(ctxA) })
	time.Sleep(20 * time.Millisecond)
	wg.Go(func() { _ = elector(b).Run(ctxB) })

	shardsOf := func(identity string) []int {
		mu.Lock()
		defer mu.Unlock()
		return slices.Sorted(slices.Values(held[identity]))
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(shardsOf(a)) == 1 && len(shardsOf(b)) == 1, nil
	})
	if err != nil || shardsOf(a)[0] == shardsOf(b)[0] {
		t.Fatalf("%s holds %v and %s %v, want one shard each", a, shardsOf(a), b, shardsOf(b))
	}
	// Past a lease duration, neither takes the other's.
	time.Sleep(3 * time.Second)
	if len(shardsOf(a)) != 1 || len(shardsOf(b)) != 1 {
		t.Fatalf("%s holds %v and %s %v, want one shard each still", a, shardsOf(a), b, shardsOf(b))
	}

	stopA()
	err = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(shardsOf(b)) == 2, nil
	})
	if err != nil {
		t.Fatalf("%s holds %v after %s stopped, want both shards", b, shardsOf(b), a)
	}
}
