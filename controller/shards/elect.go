package shards

import (
	"context"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// LeaseName is the hub Lease of shard i of n: mcs-controller when there is
// one shard (the Lease of the single active replica), else
// mcs-controller-shard-<i>. Each also says n (fence.go).
func LeaseName(i, n int) string {
	if n == 1 {
		return "mcs-controller"
	}
	return shardLeasePrefix + strconv.Itoa(i)
}

const shardLeasePrefix = "mcs-controller-shard-"

// Elector campaigns for every shard's Lease with client-go's leader
// election, one campaign per shard. A replica that stops renewing loses
// its shards after the lease duration, and the replicas campaigning for
// them take them over.
//
// Replicas started together split the shards: each campaigns first for
// the shard its identity hashes to, moves on to the next at once while
// it holds none, and waits a lease duration before each further one, so
// that the others take theirs first. A replica started after the others
// took every shard stands by.
type Elector struct {
	Shards                                    int
	Client                                    kubernetes.Interface
	Namespace                                 string
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MaxHeld is the most shards this replica takes; 0: no bound. Once it
	// holds that many it ends its other campaigns, so that shards freed in
	// a rollout go to replicas holding fewer.
	MaxHeld int
	// Acquired is called with each shard this replica takes.
	Acquired func(shard int)
	// Lost is called when this replica fails to renew a shard's Lease.
	Lost func(shard int)
	// Clock paces the wait for another count's Leases (fence.go); nil:
	// the real clock.
	Clock clock.WithTicker

	mu        sync.Mutex
	campaigns []*campaign
	held      int
}

// campaign is one shard's.
type campaign struct {
	elector *leaderelection.LeaderElector
	ctx     context.Context
	// resolved closes once the shard is taken by this replica, seen held
	// by another, or the campaign ended.
	resolved chan struct{}
	mine     bool
	end      func()
}

// Run campaigns until ctx ends, then releases the Leases held and returns.
// An error is a configuration that cannot be campaigned with.
func (e *Elector) Run(ctx context.Context) error {
	e.campaigns = make([]*campaign, e.Shards)
	for i := range e.Shards {
		var err error
		if e.campaigns[i], err = e.campaign(ctx, i); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	first := e.firstShard()
	for k := range e.Shards {
		i := (first + k) % e.Shards
		if k > 0 && !e.pause(ctx, e.campaigns[(i+e.Shards-1)%e.Shards].resolved) {
			return nil
		}
		wg.Go(func() { e.campaigns[i].elector.Run(e.campaigns[i].ctx) })
	}
	return nil
}

// campaign makes shard i's, not started yet.
func (e *Elector) campaign(ctx context.Context, i int) (*campaign, error) {
	name := LeaseName(i, e.Shards)
	lock, err := resourcelock.NewWithLabels(resourcelock.LeasesResourceLock, e.Namespace, name,
		e.Client.CoreV1(), e.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: e.Identity},
		map[string]string{LabelShards: strconv.Itoa(e.Shards)})
	if err != nil {
		return nil, err
	}
	c := &campaign{resolved: make(chan struct{})}
	resolve := sync.OnceFunc(func() { close(c.resolved) })
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithCancel(ctx)
	c.end = func() { cancel(); resolve() }
	c.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: name,
		LeaseDuration: e.LeaseDuration, RenewDeadline: e.RenewDeadline, RetryPeriod: e.RetryPeriod,
		// Ending the campaign is what releases the Lease.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				if !e.take(i) {
					c.end() // one too many, taken at the same time as another
					return
				}
				resolve()
				// ctx ends when the Lease is lost or the campaign ends.
				if e.fence(ctx, i) == nil {
					e.Acquired(i)
				}
			},
			// Called also when the campaign ends, as every campaign does.
			OnStoppedLeading: func() {
				if c.ctx.Err() == nil {
					e.Lost(i)
				}
			},
			OnNewLeader: func(identity string) {
				if identity != e.Identity {
					resolve()
				}
			},
		},
	})
	return c, err
}

// take counts shard i as held, unless this replica holds MaxHeld already;
// at MaxHeld it ends the campaigns for shards it does not hold. A shard
// is lost only by exiting, so the count never goes down.
func (e *Elector) take(i int) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.MaxHeld > 0 && e.held >= e.MaxHeld {
		return false
	}
	e.held++
	e.campaigns[i].mine = true
	if e.held == e.MaxHeld {
		for _, c := range e.campaigns {
			if !c.mine {
				c.end()
			}
		}
	}
	return true
}

func (e *Elector) holdsAny() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.held > 0
}

// pause waits until the previous campaign is resolved, and then a lease
// duration more if this replica holds a shard. False once ctx ended.
func (e *Elector) pause(ctx context.Context, previous <-chan struct{}) bool {
	select {
	case <-previous:
	case <-ctx.Done():
		return false
	}
	if !e.holdsAny() {
		return true
	}
	select {
	case <-time.After(e.LeaseDuration):
		return true
	case <-ctx.Done():
		return false
	}
}

// firstShard is the shard this replica campaigns for first.
func (e *Elector) firstShard() int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(e.Identity))
	return int(h.Sum32() % uint32(e.Shards))
}
