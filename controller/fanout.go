package controller

import (
	"fmt"
	"time"

	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// memberWait bounds how long a sync waits for one member's writes. A
// member that takes longer (a stuck webhook, an overloaded etcd: its API
// server answers its probe but not its writes) is reported, and its writes
// go on by themselves, within applyTimeout; the service is synced again
// once they end. The syncs of the other members' services are held up by
// it for memberWait at most, and not at all while its writes for that
// service are still under way.
const memberWait = time.Second

// flight is one member's writes for one service, under way.
type flight struct{ cluster, key string }

// slow says that a member's writes are under way for longer than
// memberWait: the same whether this sync or an earlier one started them,
// so that conditions do not change between the two.
func (c *Controller) slow(cluster string) error {
	return fmt.Errorf("%s has not ended its writes within %s: the service is synced again once they end", cluster, c.memberWait)
}

// fanOut runs fn for each of ms at once, each with an outcome of its own,
// and merges into out those that end within memberWait. A member whose
// writes for key from an earlier sync are still under way is not written
// to again, and is reported.
func (c *Controller) fanOut(key string, ms []*members.Member, out *outcome, fn func(*members.Member, *outcome)) {
	type result struct {
		cluster string
		out     *outcome
	}
	results := make(chan result, len(ms))
	pending := map[string]bool{}
	for _, m := range ms {
		f := flight{m.Name, key}
		if _, busy := c.flights.LoadOrStore(f, true); busy {
			out.cannotReach(m.Name, c.slow(m.Name))
			continue
		}
		pending[m.Name] = true
		go func() {
			mine := &outcome{}
			fn(m, mine)
			c.flights.Delete(f)
			results <- result{m.Name, mine}
		}()
	}
	timer := time.NewTimer(c.memberWait)
	defer timer.Stop()
	for len(pending) > 0 {
		select {
		case r := <-results:
			delete(pending, r.cluster)
			out.merge(r.out)
		case <-timer.C:
			for cluster := range pending {
				out.cannotReach(cluster, c.slow(cluster))
			}
			go func(late int) {
				for range late {
					<-results
				}
				c.queue.Add(key)
			}(len(pending))
			return
		}
	}
}
