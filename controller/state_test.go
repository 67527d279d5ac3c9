package controller

import (
	"testing"
	"time"
)

// A service whose state holds nothing any more costs no entry: its last
// fact cleared drops it, and clearing one fact of all keeps the others.
func TestServiceStateDroppedWhenEmpty(t *testing.T) {
	var s serviceStates
	t0 := time.Unix(1, 0)
	s.update("demo/foo", func(st *serviceState) { st.seen = t0 })
	s.update("demo/bar", func(st *serviceState) { st.firstSeen = map[string]time.Time{m1: t0} })
	s.update("demo/baz", func(st *serviceState) { st.firstSeen, st.lastValid = map[string]time.Time{m1: t0}, "spec" })
	if got := s.get("demo/foo").seen; !got.Equal(t0) {
		t.Fatalf("demo/foo seen %v, want %v", got, t0)
	}
	s.update("demo/foo", func(st *serviceState) { st.seen = time.Time{} })
	s.each(func(st *serviceState) { st.firstSeen = nil })
	if len(s.by) != 1 || s.by["demo/baz"] == nil || s.by["demo/baz"].lastValid != "spec" {
		t.Errorf("states left: %v, want demo/baz's alone, its last valid spec kept", s.by)
	}
	s.update("demo/none", func(*serviceState) {})
	if _, ok := s.by["demo/none"]; ok {
		t.Error("an update that noted nothing made a state")
	}
}

// A member registered again under a name that left starts afresh, and
// the name stays among those registered in this run.
func TestMemberStateForgottenWhole(t *testing.T) {
	s := memberStates{changeRate: 1}
	s.registered.Store(m1, true)
	st := s.of(m1)
	st.slow.Store(true)
	st.pruned.Store(&prunedFields{traffic: true})
	if s.of(m1) != st {
		t.Fatal("a second look-up made another state")
	}
	s.forget(m1)
	if _, ok := s.get(m1); ok {
		t.Fatal("the state of a member that left is kept")
	}
	if again := s.of(m1); again.slow.Load() || again.pruned.Load() != nil {
		t.Error("a member registered again inherits the state of the one that left")
	}
	if _, ok := s.registered.Load(m1); !ok {
		t.Error("forgetting a member forgot that it was registered in this run")
	}
}
