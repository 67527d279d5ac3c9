package shards

import (
	"context"
	"strconv"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// A change of --shards rolls out one replica at a time: for a while,
// replicas of the old count and of the new hold Leases at once, and a
// shard of one count shares buckets with shards of the other (shard 2 of
// 4 is half of shard 0 of 2), under Leases of other names. Two replicas
// would then write one service. So each shard Lease says its holder's
// count (LabelShards), and a replica that takes a shard syncs it only once
// no Lease of another count whose buckets overlap it is held: released,
// or not renewed for its duration as this replica observes it, which is
// how client-go's leader election judges a Lease expired (by its own
// clock, never the holder's).

// LabelShards, on a shard Lease, is how many shards its holder counts.
const LabelShards = api.GroupName + "/shards"

// fence waits until shard i may be synced: no Lease of another count
// that shares a bucket with it is held. An error is ctx's.
func (e *Elector) fence(ctx context.Context, i int) error {
	clk := e.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	ticker := clk.NewTicker(e.RetryPeriod)
	defer ticker.Stop()
	seen := map[string]observed{}
	waited := false
	for {
		held, err := e.overlapping(ctx, i, seen, clk.Now())
		switch {
		case err == nil && len(held) == 0:
			if waited {
				klog.InfoS("The Leases of another shard count ended: syncing the shard", "shard", i)
			}
			return nil
		case err != nil:
			klog.ErrorS(err, "Cannot list the hub's Leases: the shard waits", "shard", i)
		case !waited:
			klog.InfoS("Waiting for the Leases of another shard count to end before syncing the shard", "shard", i, "shards", e.Shards, "leases", held)
		}
		waited = true
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C():
		}
	}
}

// observed is a Lease's record as this replica first saw it, and when.
type observed struct {
	record string
	at     time.Time
}

// overlapping lists the Leases held, as of now, of another count than
// this replica's that share a bucket with its shard i.
func (e *Elector) overlapping(ctx context.Context, i int, seen map[string]observed, now time.Time) ([]string, error) {
	list, err := e.Client.CoordinationV1().Leases(e.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var held []string
	for _, l := range list.Items {
		j, n, ok := shardOf(&l)
		if !ok || n == e.Shards || !overlap(i, e.Shards, j, n) || !live(&l, seen, now, e.LeaseDuration) {
			continue
		}
		held = append(held, l.Name)
	}
	return held, nil
}

// shardOf is the shard and count of a shard Lease; count 0 for a Lease a
// replica without LabelShards wrote, whose count is not known.
func shardOf(l *coordv1.Lease) (shard, count int, ok bool) {
	if l.Name == LeaseName(0, 1) {
		return 0, 1, true
	}
	s, found := strings.CutPrefix(l.Name, shardLeasePrefix)
	if !found {
		return 0, 0, false
	}
	shard, err := strconv.Atoi(s)
	if err != nil {
		return 0, 0, false
	}
	count, _ = strconv.Atoi(l.Labels[LabelShards])
	return shard, count, true
}

// overlap reports whether shard i of n and shard j of m share a bucket;
// any shard of an unknown count (m 0) may.
func overlap(i, n, j, m int) bool {
	if m <= 0 {
		return true
	}
	for b := range Buckets {
		if b%n == i && b%m == j {
			return true
		}
	}
	return false
}

// live reports whether l is held as of now: it has a holder, and its
// record changed less than its duration ago, as first seen here.
func live(l *coordv1.Lease, seen map[string]observed, now time.Time, fallback time.Duration) bool {
	holder := ptr.Deref(l.Spec.HolderIdentity, "")
	if holder == "" {
		return false // released
	}
	record := holder + "@" + l.Spec.RenewTime.String()
	o, ok := seen[l.Name]
	if !ok || o.record != record {
		o = observed{record, now}
		seen[l.Name] = o
	}
	duration := fallback
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		duration = time.Duration(*s) * time.Second
	}
	return now.Sub(o.at) < duration
}
