package controller

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/klog/v2"
)

// A member's changes queue their services at most Options.ChangeRate a
// second, in bursts of changeBurst seconds' worth: a member that flaps its
// slices cannot make the controller write into every consumer at its full
// QPS. Every change of a member's that queues a service counts: of its
// EndpointSlices, and of its Services, ServiceExports and ServiceImports,
// which a tenant who may only make those in their own namespace flaps as
// well. A change past the budget queues its
// service for when the budget allows, once however often it changes
// meanwhile, on the queue's own delay: what waits is bounded by the
// member's services, not its changes.

// changeBurst is how many seconds of the rate a member may spend at once:
// a rollout's burst of changes passes unpaced.
const changeBurst = 20

// pacedFor is how long a member counts as paced after its last change
// that had to wait: what the MultiClusterServices it provides say.
const pacedFor = time.Minute

// budget is one member's (memberState.changes).
type budget struct {
	mu      sync.Mutex
	limiter *rate.Limiter
	waiting map[string]bool // keys queued for later, not yet synced
	paced   time.Time       // the last change that had to wait
}

// sourceChanged queues key for a change of cluster's, now when its budget
// allows, else once for when it will.
func (c *Controller) sourceChanged(cluster, key string) {
	if c.opts.ChangeRate <= 0 {
		c.queue.Add(key)
		return
	}
	b := c.perMember.of(cluster).changes
	now := c.opts.Clock.Now()
	b.mu.Lock()
	if b.waiting[key] {
		b.mu.Unlock()
		return
	}
	delay := b.limiter.ReserveN(now, 1).DelayFrom(now)
	first := delay > 0 && now.Sub(b.paced) > pacedFor
	if delay > 0 {
		b.waiting[key], b.paced = true, now
	}
	b.mu.Unlock()
	if delay <= 0 {
		c.queue.Add(key)
		return
	}
	changesPaced.WithLabelValues(cluster).Inc()
	if first {
		klog.InfoS("A member changes its objects faster than its budget: its changes are paced", "cluster", cluster, "rate", c.opts.ChangeRate, "burst", changeBurst*c.opts.ChangeRate)
	}
	c.queue.AddAfter(key, delay)
}

// unpaced lets key's next change be queued anew: its sync has begun.
func (s *memberStates) unpaced(key string) {
	s.by.Range(func(_ string, st *memberState) bool {
		b := st.changes
		b.mu.Lock()
		delete(b.waiting, key)
		b.mu.Unlock()
		return true
	})
}

// paced lists the clusters among these whose changes had to wait within
// pacedFor before now.
func (s *memberStates) paced(clusters []string, now time.Time) []string {
	var out []string
	for _, cl := range clusters {
		if st, ok := s.get(cl); ok {
			b := st.changes
			b.mu.Lock()
			if !b.paced.IsZero() && now.Sub(b.paced) <= pacedFor {
				out = append(out, cl)
			}
			b.mu.Unlock()
		}
	}
	return out
}
