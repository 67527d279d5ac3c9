package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestParallelCallsEachOnceWithinTheLimit(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	var running, most atomic.Int32
	err := parallel(t.Context(), 3, 100, nil, func(i int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if seen[i] != 1 {
			t.Fatalf("fn(%d) called %d times", i, seen[i])
		}
	}
	if most.Load() > 3 {
		t.Fatalf("%d calls at once, limit 3", most.Load())
	}
}

func TestParallelStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	err := parallel(t.Context(), 1, 1000, nil, func(i int) error {
		calls.Add(1)
		if i == 5 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if n := calls.Load(); n > 7 {
		t.Fatalf("%d calls after the error at 5", n)
	}
}

func TestParallelCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var calls atomic.Int32
	err := parallel(ctx, 2, 100, nil, func(int) error { calls.Add(1); return nil })
	if !errors.Is(err, context.Canceled) || calls.Load() != 0 {
		t.Fatalf("got %v after %d calls, want context.Canceled and none", err, calls.Load())
	}
}
