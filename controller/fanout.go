package controller

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// memberWait bounds how long a sync waits for one member's writes. A
// member that takes longer (a stuck webhook, an overloaded etcd: its API
// server answers its probe but not its writes) is slow: its writes go on
// by themselves, within applyTimeout, and the service is synced again once
// they end, with what they did. Until one of its writes ends within
// memberWait again, no sync waits for its writes at all, and none writes a
// service into it while its writes for that service are still under way:
// the other members' changes go through as if it were not there. A sync
// with nothing to write there still waits for that finding, which takes no
// write: it reports what it found, not what others' writes do. Nor does a
// sync wait for a member once a provider's slices of the service changed
// again: the queue holds the change until the sync of the key ends, so the
// wait would hold it back from every other member.
const memberWait = time.Second

// memberLate is how long a member's writes of one service are under way
// before the conditions of the services it is written for say it is slow
// (MemberSlow), until no write of it is under way that long. A member
// busy with an initial sync takes more than memberWait for many services'
// writes, each answered: an alarm on every one of them, and back, would
// be two status writes and two Events per service on the hub, saying
// nothing that stays true. Well below applyTimeout, so that a member that
// hangs is reported while its writes go on.
const memberLate = 5 * time.Second

// fanout writes a sync's plan into its members at once, each member's
// writes a flight of their own, and notes which members are slow and what
// each sync under way read (see memberWait).
type fanout struct {
	perMember *memberStates // whether each is slow, and late
	wait      time.Duration // memberWait, but for tests
	clock     clock.WithTicker
	requeue   func(key string)
	// flights are the members' writes under way.
	flights syncMap[flight, bool]
	slots   *slots
	// services hold what the sync of each key under way read of its
	// sources.
	perService *serviceStates
	// waitsFor, when set, is told which members a sync of key waits for,
	// each time that changes: the tests step their clock by it.
	waitsFor func(key string, waiting map[string]bool)
}

// flight is one member's writes for one service.
type flight struct{ cluster, key string }

type landing struct {
	cluster string
	out     *outcome
}

// run runs fn for each of ms at once, each with an outcome of its own,
// and merges into out what the members it waits for did. Members it does
// not wait for are noted in out (outcome.wait): what their writes do is
// not reported by this sync, nor by a later one, which would report it
// against a plan that may have changed since. Their errors are logged,
// and the key queued again once they end, so that the next sync writes
// anew and reports what it finds.
func (f *fanout) run(key string, ms []*members.Member, out *outcome, fn func(*members.Member, *outcome)) {
	landings := make(chan landing, len(ms))
	writing := make(chan string, len(ms))
	waiting := map[string]bool{}
	// untilWrite are the slow members among them: waited for until their
	// writes begin, if they have any.
	untilWrite := map[string]bool{}
	late := 0
	for _, m := range ms {
		fl := flight{m.Name, key}
		if _, busy := f.flights.LoadOrStore(fl, true); busy {
			f.notWaited(out, m.Name)
			continue
		}
		if !f.slots.take(fl) {
			f.flights.Delete(fl)
			f.notWaited(out, m.Name)
			continue
		}
		go f.fly(fl, m, fn, landings, writing)
		waiting[m.Name] = true
		untilWrite[m.Name] = f.slow(m.Name)
	}
	timer := f.clock.NewTimer(f.wait)
	defer timer.Stop()
	var changed <-chan struct{} // nil, which never fires, for a key no sync reads
	if r := f.perService.get(key).reading; r != nil {
		changed = r.changed
	}
	for len(waiting) > 0 {
		if f.waitsFor != nil {
			f.waitsFor(key, waiting)
		}
		select {
		case <-changed: // a source changed: not waited for
			for cluster := range waiting {
				f.notWaited(out, cluster)
			}
			late += len(waiting)
			waiting = nil
		case cluster := <-writing:
			if waiting[cluster] && untilWrite[cluster] {
				delete(waiting, cluster)
				f.notWaited(out, cluster)
				late++
			}
		case l := <-landings:
			if waiting[l.cluster] {
				delete(waiting, l.cluster)
				out.merge(l.out)
				continue
			}
			dropLate(key, l)
			late--
			f.requeue(key)
		case <-timer.C():
			for cluster := range waiting {
				f.perMember.of(cluster).slow.Store(true)
				f.notWaited(out, cluster)
			}
			late += len(waiting)
			waiting = nil
		}
	}
	if late > 0 {
		go func() {
			for range late {
				dropLate(key, <-landings)
			}
			f.requeue(key)
		}()
	}
}

// notWaited notes in out a member whose writes the sync does not wait
// for, and whether that is because the member is slow: some of its writes
// have been under way longer than memberLate.
func (f *fanout) notWaited(out *outcome, cluster string) {
	why := ""
	if st, ok := f.perMember.get(cluster); ok && st.late.Load() > 0 {
		why = fmt.Sprintf("%s is slow: its API server has had writes under way for more than %s; they go on (for %s at most), and the service is synced again when they end", cluster, memberLate, applyTimeout)
	}
	out.wait(cluster, why)
}

// dropLate logs what the writes no sync waited for failed to do.
func dropLate(key string, l landing) {
	if err := l.out.err(); err != nil {
		klog.ErrorS(err, "Writes no sync waited for failed; the service is synced again", "service", key, "cluster", l.cluster)
	}
}

// fly runs one member's writes, and notes whether the member is slow: it
// is once its writes take longer than the wait, and stays so until one of
// its writes is answered within it, or none is under way any more. Writes
// that wrote nothing (nothing differed there) while others of the member
// hang say nothing of it. Writes under way longer than memberLate count
// the member late while they go on, and queue the service, whose
// conditions then say so. writing is told of the member once its first
// write begins.
func (f *fanout) fly(fl flight, m *members.Member, fn func(*members.Member, *outcome), landings chan<- landing, writing chan<- string) {
	mine := &outcome{begin: sync.OnceFunc(func() { writing <- m.Name })}
	st := f.perMember.of(m.Name)
	began := f.clock.Now()
	landed := f.countLate(fl, st)
	guarded(fl, m, fn, mine)
	landed()
	switch {
	case f.clock.Since(began) > f.wait:
		st.slow.Store(true)
	case mine.answered, mine.unreachable != nil, f.slots.alone(m.Name):
		// A write answered in time; or the member is reported unreachable,
		// not slow; or nothing of it was under way but these writes, which
		// wrote nothing: nothing hangs there.
		st.slow.Store(false)
	}
	f.flights.Delete(fl)
	if key, ok := f.slots.give(m.Name); ok {
		f.requeue(key)
	}
	landings <- landing{m.Name, mine}
}

// countLate counts a flight in its member's late ones once it has been
// under way for memberLate, and queues its service, whose conditions then
// say so; landed counts it out.
func (f *fanout) countLate(fl flight, st *memberState) (landed func()) {
	var state atomic.Int32 // in flight, then overdue or landed, whichever comes first
	overdue, ended := f.clock.NewTimer(memberLate), make(chan struct{})
	go func() {
		select {
		case <-overdue.C():
			if state.CompareAndSwap(inFlight, overdueFlight) {
				st.late.Add(1)
				f.requeue(fl.key)
			}
		case <-ended:
		}
	}()
	return func() {
		close(ended)
		overdue.Stop()
		if !state.CompareAndSwap(inFlight, landedFlight) {
			st.late.Add(-1)
		}
	}
}

// The states of a flight (countLate).
const (
	inFlight int32 = iota
	overdueFlight
	landedFlight
)

// guarded runs fn, and turns a panic in it into a failure of the
// member's writes, logged and counted, so that a defect met in one
// member's writes fails that sync alone, which is retried, rather than
// taking down the process and every member's sync with it. The last line
// only: the writes handle what they can meet.
func guarded(fl flight, m *members.Member, fn func(*members.Member, *outcome), mine *outcome) {
	defer func() {
		if r := recover(); r != nil {
			writePanics.Inc()
			klog.ErrorS(nil, "A member's writes panicked; the service is synced again", "service", fl.key, "cluster", fl.cluster, "panic", r, "stack", string(debug.Stack()))
			mine.applyFailed(m.Name, fmt.Errorf("an internal error (a panic) stopped the writes: %v", r))
		}
	}()
	fn(m, mine)
}

// slow reports whether no sync waits for the member's writes.
func (f *fanout) slow(cluster string) bool {
	st, ok := f.perMember.get(cluster)
	return ok && st.slow.Load()
}

// slots bound the services whose writes are under way in one member at
// once. Past that, a member's API server only queues them (an initial sync
// of thousands of services, a member that hangs): each write then takes
// longer, times out and is retried, and more of them make it slower, not
// faster. A service that finds no free slot is deferred: its key is queued
// again when a slot of that member frees, the oldest first, and the other
// members are written meanwhile.
type slots struct {
	mu       sync.Mutex
	limit    int                 // per member; 0: no bound
	busy     map[string]int      // by member
	deferred map[string][]string // by member: keys waiting for a slot, oldest first
	waiting  map[flight]bool     // the deferred keys, by member
}

func newSlots(limit int) *slots {
	return &slots{limit: limit, busy: map[string]int{}, deferred: map[string][]string{}, waiting: map[flight]bool{}}
}

// take takes a slot of f's member for f, or defers f's key.
func (s *slots) take(f flight) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.limit == 0 || s.busy[f.cluster] < s.limit {
		s.busy[f.cluster]++
		return true
	}
	if !s.waiting[f] {
		s.waiting[f] = true
		s.deferred[f.cluster] = append(s.deferred[f.cluster], f.key)
	}
	return false
}

// alone reports whether one service's writes alone are under way in
// cluster: those of the caller, which holds a slot.
func (s *slots) alone(cluster string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.busy[cluster] == 1
}

// give frees a slot of cluster, and returns the key that waited for one
// longest, if any.
func (s *slots) give(cluster string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.busy[cluster]--
	q := s.deferred[cluster]
	if len(q) == 0 {
		return "", false
	}
	key := q[0]
	s.deferred[cluster] = q[1:]
	delete(s.waiting, flight{cluster, key})
	// An initial sync defers thousands of keys: what they grew goes once
	// none waits (a map keeps its size, a slice its array).
	if len(q) == 1 {
		delete(s.deferred, cluster)
	}
	if len(s.waiting) == 0 {
		s.waiting = map[flight]bool{}
	}
	return key, true
}

// reading is what a sync of a key read of its providers' slices, so that
// a change of one since ends the sync's wait for a member's writes
// (fanout.run): the queue holds that change until the sync ends. The delivery
// of a change the sync read already ends nothing: an informer calls its
// handlers after its cache has the change, so a sync may read a change
// before its event arrives.
type reading struct {
	members map[string]desired.Member // the sync's input, which nothing changes
	changed chan struct{}
	once    sync.Once
}

// readSources notes what the sync of key read of the providers' slices,
// until done is called.
func (f *fanout) readSources(key string, in *desired.Input) (done func()) {
	r := &reading{members: in.Members, changed: make(chan struct{})}
	f.perService.update(key, func(s *serviceState) { s.reading = r })
	return func() {
		f.perService.update(key, func(s *serviceState) {
			if s.reading == r {
				s.reading = nil
			}
		})
	}
}

// sourceChanged tells the sync of key, if one runs, of a source slice
// delivered by cluster's informer.
func (f *fanout) sourceChanged(key, cluster string, obj metav1.Object) {
	r := f.perService.get(key).reading
	if r == nil {
		return
	}
	read := slices.ContainsFunc(r.members[cluster].Slices, func(s *discoveryv1.EndpointSlice) bool {
		return s.Name == obj.GetName() && s.ResourceVersion == obj.GetResourceVersion()
	})
	if !read {
		r.once.Do(func() { close(r.changed) })
	}
}
