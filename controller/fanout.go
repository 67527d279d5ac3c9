package controller

import (
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// memberWait bounds how long a sync waits for one member's writes. A
// member that takes longer (a stuck webhook, an overloaded etcd: its API
// server answers its probe but not its writes) is slow: its writes go on
// by themselves, within applyTimeout, and the service is synced again once
// they end, with what they did. Until one of its writes ends within
// memberWait again, no sync waits for it at all, and none writes a service
// into it while its writes for that service are still under way: the
// other members' changes go through as if it were not there. Nor does a
// sync wait for a member once a provider's slices of the service changed
// again: the queue holds the change until the sync of the key ends, so the
// wait would hold it back from every other member.
const memberWait = time.Second

// flight is one member's writes for one service.
type flight struct{ cluster, key string }

type landing struct {
	cluster string
	out     *outcome
}

// fanOut runs fn for each of ms at once, each with an outcome of its own,
// and merges into out what the members it waits for did (see memberWait),
// and what the writes of earlier syncs that it did not wait for did.
// Members it does not wait for are noted in out.pending.
func (c *Controller) fanOut(key string, ms []*members.Member, out *outcome, fn func(*members.Member, *outcome)) {
	landings := make(chan landing, len(ms))
	waiting := map[string]bool{}
	late := 0
	for _, m := range ms {
		f := flight{m.Name, key}
		if done, ok := c.landed.LoadAndDelete(f); ok {
			out.merge(done)
		}
		if busy := c.flights.LoadOrStore(f, true); busy {
			out.wait(m.Name)
			continue
		}
		if !c.slots.take(f) {
			c.flights.Delete(f)
			out.wait(m.Name)
			continue
		}
		go c.fly(f, m, fn, landings)
		if _, slow := c.slowMembers.Load(m.Name); slow {
			out.wait(m.Name)
			late++
			continue
		}
		waiting[m.Name] = true
	}
	timer := c.clock.NewTimer(c.memberWait)
	defer timer.Stop()
	var changed <-chan struct{} // nil, which never fires, for a key no sync reads
	if r, ok := c.reads.Load(key); ok {
		changed = r.changed
	}
	for len(waiting) > 0 {
		select {
		case <-changed: // a source changed: not known slow, but not waited for
			for cluster := range waiting {
				out.wait(cluster)
			}
			late += len(waiting)
			waiting = nil
		case l := <-landings:
			if waiting[l.cluster] {
				delete(waiting, l.cluster)
				out.merge(l.out)
				continue
			}
			c.landed.Store(flight{l.cluster, key}, l.out)
			late--
			c.queue.Add(key)
		case <-timer.C():
			for cluster := range waiting {
				out.wait(cluster)
				c.slowMembers.Store(cluster, true)
			}
			late += len(waiting)
			waiting = nil
		}
	}
	if late > 0 {
		go func() {
			for range late {
				l := <-landings
				c.landed.Store(flight{l.cluster, key}, l.out)
			}
			c.queue.Add(key)
		}()
	}
}

// fly runs one member's writes, and notes whether the member is slow.
func (c *Controller) fly(f flight, m *members.Member, fn func(*members.Member, *outcome), landings chan<- landing) {
	mine := &outcome{}
	began := c.clock.Now()
	fn(m, mine)
	if c.clock.Since(began) > c.memberWait {
		c.slowMembers.Store(m.Name, true)
	} else {
		c.slowMembers.Delete(m.Name)
	}
	c.flights.Delete(f)
	if key, ok := c.slots.give(m.Name); ok {
		c.queue.Add(key)
	}
	landings <- landing{m.Name, mine}
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
// (fanOut): the queue holds that change until the sync ends. The delivery
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
func (c *Controller) readSources(key string, in *desired.Input) (done func()) {
	r := &reading{members: in.Members, changed: make(chan struct{})}
	c.reads.Store(key, r)
	return func() { c.reads.CompareAndDelete(key, r) }
}

// sourceChanged tells the sync of key, if one runs, of a source slice
// delivered by cluster's informer.
func (c *Controller) sourceChanged(key, cluster string, obj metav1.Object) {
	r, ok := c.reads.Load(key)
	if !ok {
		return
	}
	read := slices.ContainsFunc(r.members[cluster].Slices, func(s *discoveryv1.EndpointSlice) bool {
		return s.Name == obj.GetName() && s.ResourceVersion == obj.GetResourceVersion()
	})
	if !read {
		r.once.Do(func() { close(r.changed) })
	}
}
