package controller

import (
	"sync/atomic"

	"golang.org/x/time/rate"
)

// What the controller notes of each member is one memberState, owned by
// memberStates: a new fact of a member is a field here, and a member
// that leaves is forgotten by dropping its value. The files that use a
// field say what it means.

// memberState is what the controller notes of one member.
type memberState struct {
	// slow: no sync waits for its writes (fanout.go).
	slow atomic.Bool
	// pruned are the ServiceImport fields its CRD drops (imports.go).
	pruned atomic.Pointer[prunedFields]
	// changes paces its source changes (budget.go).
	changes *budget
	// endpoints are what its exports cost, guarded by the
	// endpointBudgets' lock (endpointbudget.go).
	endpoints *memberBudget
}

// memberStates holds a memberState by member name, made at its first use.
type memberStates struct {
	by syncMap[string, *memberState]
	// registered holds the name of every member registered in this run,
	// also once it left and was forgotten: a spec that still names it is
	// followed without it (sync.go, input).
	registered syncMap[string, bool]
	// changeRate is Options.ChangeRate, each member's budget.
	changeRate float64
}

// of is the member's state, made if it has none.
func (s *memberStates) of(name string) *memberState {
	if st, ok := s.by.Load(name); ok {
		return st
	}
	st := &memberState{
		changes:   &budget{limiter: rate.NewLimiter(rate.Limit(s.changeRate), max(1, int(s.changeRate*changeBurst))), waiting: map[string]bool{}},
		endpoints: &memberBudget{exports: map[string]*exportCost{}, dirty: map[string]bool{}},
	}
	got, _ := s.by.m.LoadOrStore(name, st)
	return got.(*memberState)
}

// get is the member's state, if it has one, without making it.
func (s *memberStates) get(name string) (*memberState, bool) { return s.by.Load(name) }

// forget drops the state of a member that left: registered again under
// the name, it starts afresh.
func (s *memberStates) forget(name string) { s.by.Delete(name) }
