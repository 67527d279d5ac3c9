package controller

import (
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// What the controller notes of each member is one memberState, owned by
// memberStates: a new fact of a member is a field here, and a member
// that leaves is forgotten by dropping its value. The files that use a
// field say what it means. Not here: the writes under way (fanout.go's
// flights and slots), which end by themselves and must be counted out
// after their member left, and the tracker's writes, by object.

// memberState is what the controller notes of one member.
type memberState struct {
	// slow: no sync waits for its writes (fanout.go).
	slow atomic.Bool
	// late counts its flights under way longer than memberLate
	// (fanout.go): while any is, the conditions say it is slow.
	late atomic.Int32
	// pruned are the ServiceImport fields its CRD drops (imports.go).
	pruned atomic.Pointer[prunedFields]
	// changes paces its source changes (budget.go).
	changes *budget
	// endpoints are what its exports cost, guarded by the
	// endpointBudgets' lock (endpointbudget.go).
	endpoints *memberBudget
	// renamedFrom is the name it succeeded in a rename, once that member
	// was let go (rename.go): its exports keep that name's ages.
	renamedFrom atomic.Pointer[string]
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
	st, _ = s.by.LoadOrStore(name, st)
	return st
}

// get is the member's state, if it has one, without making it.
func (s *memberStates) get(name string) (*memberState, bool) { return s.by.Load(name) }

// forget drops the state of a member that left: registered again under
// the name, it starts afresh.
func (s *memberStates) forget(name string) { s.by.Delete(name) }

// What the controller notes of each service is one serviceState, owned by
// serviceStates: a new fact of a service is a field here. A state whose
// fields are all empty is dropped, so that a service that needs nothing
// noted costs nothing.

// serviceState is what the controller notes of one service, by its key.
type serviceState struct {
	// seen is when a source slice change was first seen and not yet
	// synced: the start of the propagation latency.
	seen time.Time
	// lastValid is the MultiClusterService's spec as it was when it was
	// last valid (sync.go, followed).
	lastValid any
	// firstSeen is when this run first saw each member provide the
	// service (ages.go).
	firstSeen map[string]time.Time
	// reading is what the sync of the service under way read of its
	// sources (fanout.go).
	reading *reading
}

func (s *serviceState) empty() bool {
	return s.seen.IsZero() && s.lastValid == nil && len(s.firstSeen) == 0 && s.reading == nil
}

// serviceStates holds a serviceState by service key. The workers and the
// informers' handlers share it; each change is made under its lock.
type serviceStates struct {
	mu sync.Mutex
	by map[string]*serviceState
}

// get is a copy of the service's state; the zero one when it has none.
func (s *serviceStates) get(key string) serviceState {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.by[key]; st != nil {
		return *st
	}
	return serviceState{}
}

// update changes the service's state with change, and drops it if that
// leaves it empty.
func (s *serviceStates) update(key string, change func(*serviceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.by[key]
	if st == nil {
		st = &serviceState{}
	}
	change(st)
	switch {
	case !st.empty():
		if s.by == nil {
			s.by = map[string]*serviceState{}
		}
		s.by[key] = st
	case s.by != nil:
		delete(s.by, key)
	}
}

// each changes every service's state with change, dropping those it
// leaves empty.
func (s *serviceStates) each(change func(*serviceState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, st := range s.by {
		if change(st); st.empty() {
			delete(s.by, key)
		}
	}
}
