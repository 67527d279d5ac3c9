package shards

import (
	"context"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseName is the hub Lease of shard i of n: mcs-controller when there is
// one shard (the Lease of the single active replica), else
// mcs-controller-shard-<i>.
func LeaseName(i, n int) string {
	if n == 1 {
		return "mcs-controller"
	}
	return "mcs-controller-shard-" + strconv.Itoa(i)
}

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
	// Acquired is called with each shard this replica takes.
	Acquired func(shard int)
	// Lost is called when this replica fails to renew a shard's Lease.
	Lost func(shard int)

	held atomic.Int32
}

// Run campaigns until ctx ends, then releases the Leases held and returns.
// An error is a configuration that cannot be campaigned with.
func (e *Elector) Run(ctx context.Context) error {
	electors := make([]*leaderelection.LeaderElector, e.Shards)
	resolved := make([]chan struct{}, e.Shards)
	for i := range e.Shards {
		var err error
		if electors[i], resolved[i], err = e.elector(ctx, i); err != nil {
			return err
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	first := e.firstShard()
	for k := range e.Shards {
		i := (first + k) % e.Shards
		if k > 0 && !e.pause(ctx, resolved[(i+e.Shards-1)%e.Shards]) {
			return nil
		}
		wg.Go(func() { electors[i].Run(ctx) })
	}
	return nil
}

// elector is shard i's campaign, and a channel that closes once the shard
// is resolved: taken by this replica or seen held by another.
func (e *Elector) elector(ctx context.Context, i int) (*leaderelection.LeaderElector, chan struct{}, error) {
	name := LeaseName(i, e.Shards)
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, e.Namespace, name,
		e.Client.CoreV1(), e.Client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: e.Identity})
	if err != nil {
		return nil, nil, err
	}
	resolved := make(chan struct{})
	resolve := sync.OnceFunc(func() { close(resolved) })
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, Name: name,
		LeaseDuration: e.LeaseDuration, RenewDeadline: e.RenewDeadline, RetryPeriod: e.RetryPeriod,
		// Cancelling ctx is what releases the Lease.
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				e.held.Add(1)
				resolve()
				e.Acquired(i)
			},
			// Called also when ctx ends, as a campaign does.
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
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
	return le, resolved, err
}

// pause waits until the previous campaign is resolved, and then a lease
// duration more if this replica holds a shard. False once ctx ended.
func (e *Elector) pause(ctx context.Context, previous <-chan struct{}) bool {
	select {
	case <-previous:
	case <-ctx.Done():
		return false
	}
	if e.held.Load() == 0 {
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
