//go:build lab

package e2e

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// servicesPerShard is how many services of each shard the shard test syncs.
const servicesPerShard = 3

// Two replicas with --shards 2 take a shard each and write only the
// objects of their own shard's services. Killing one (SIGKILL: its Lease
// is not handed over) makes the other take its shard over within a few
// lease durations, without a write on the unchanged world, and it then
// syncs the next change of a service of that shard.
func TestTwoShards(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub, m1, m2)
	byShard, replicas := startShards(t, ns, "--shards", "2")
	holder := shardHolders(t, replicas)
	for shard, r := range holder {
		if w := replicas[r].writes(t); w["ServiceImport/create"] != servicesPerShard {
			t.Errorf("the holder of shard %d wrote %v, want the %d ServiceImports of its services", shard, w, servicesPerShard)
		}
	}
	for _, name := range append(byShard[0], byShard[1]...) {
		s, err := l.Client(t, m2).CoreV1().Services(ns).Get(t.Context(), api.DerivedPrefix+name, metav1.GetOptions{})
		if err != nil || s.Labels[api.LabelBucket] != shards.Label(ns, name) {
			t.Errorf("member2's %s%s: %v, labels %v, want its bucket %s", api.DerivedPrefix, name, err, s.Labels, shards.Label(ns, name))
		}
	}

	killed, survivor := holder[0], holder[1]
	before := replicas[survivor].writes(t)
	synced := replicas[survivor].synced(t)
	replicas[killed].Kill()
	at := time.Now()
	awaitShard0(t, "the survivor", replicas[survivor], synced)
	took := time.Since(at)
	t.Logf("the survivor synced shard 0 %s after its holder was killed (lease %s)", took.Round(time.Millisecond), leaderLease)
	if took > 5*leaderLease+5*time.Second {
		t.Errorf("the survivor took %s to take shard 0 over, want about the lease duration %s and a probe", took, leaderLease)
	}
	if w := replicas[survivor].writes(t); !maps.Equal(w, before) {
		t.Errorf("taking shard 0 over an unchanged world wrote %v, want nothing more than %v", w, before)
	}

	name := byShard[0][0]
	l.Apply(t, m1, oneEndpointSlice(ns, name, "10.10.1.1"))
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		return importedFrom(ctx, t, ns, name, map[string][]string{m1: {"10.10.1.1"}})
	})
	// The write is counted once the API server answered, a moment after
	// member2 has it.
	want := maps.Clone(before)
	want["EndpointSlice/update"]++
	labtest.Eventually(t, 5*time.Second, func(context.Context) error {
		if after := replicas[survivor].writes(t); !maps.Equal(after, want) {
			return fmt.Errorf("after the change of %s, the survivor's writes are %v, want %v: one EndpointSlice update more", name, after, want)
		}
		return nil
	})
}

// With --max-shards 1, the replica whose peer is killed keeps to its one
// shard; the killed replica's shard waits for the next replica, which takes
// it (it holds none) and syncs its services without a write.
func TestMaxShardsLeavesAShardToTheNextReplica(t *testing.T) {
	ns := labtest.Get(t).Namespace(t, labtest.Hub, m1, m2)
	args := []string{"--shards", "2", "--max-shards", "1"}
	_, replicas := startShards(t, ns, args...)
	holder := shardHolders(t, replicas)
	killed, survivor := holder[0], holder[1]
	replicas[killed].Kill()
	// Three lease durations: the survivor would have taken shard 0 in one.
	time.Sleep(3 * leaderLease)
	m, err := getMetrics(t.Context(), replicas[survivor].metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	if s := series("leader_election_master_status", "name", shards.LeaseName(0, 2)); m[s] == 1 {
		t.Fatalf("the survivor took shard 0 past --max-shards 1: %s = 1", s)
	}

	next := startReplicas(t, ns, 1, append(args, fastLeader...)...)[0]
	awaitShard0(t, "the next replica", next, 0)
	if w := next.writes(t); len(w) > 0 {
		t.Errorf("taking shard 0 over an unchanged world wrote %v, want nothing", w)
	}
}

// awaitShard0 waits until replica c holds shard 0 of 2 and has synced its
// servicesPerShard services since it had synced synced.
func awaitShard0(t *testing.T, who string, c *controller, synced float64) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		m, err := getMetrics(ctx, c.metricsURL)
		if err != nil {
			return err
		}
		if s := series("leader_election_master_status", "name", shards.LeaseName(0, 2)); m[s] != 1 {
			return fmt.Errorf("%s does not hold shard 0 yet: %s = %v", who, s, m[s])
		}
		if n := m[series("mcs_sync_svc_duration_seconds_count", "result", "success")]; n < synced+servicesPerShard {
			return fmt.Errorf("%s synced %v services since it took shard 0, want its %d", who, n-synced, servicesPerShard)
		}
		return nil
	})
}

// startShards writes servicesPerShard services of each of two shards
// (names by shard) and starts two replicas with args and fastLeader, and
// returns once every service is imported into member2.
func startShards(t *testing.T, ns string, args ...string) ([2][]string, []*controller) {
	t.Helper()
	byShard := [2][]string{}
	var w sliceWorld
	for i := 0; len(byShard[0]) < servicesPerShard || len(byShard[1]) < servicesPerShard; i++ {
		name := fmt.Sprintf("svc-%d", i)
		shard := shards.Bucket(ns, name) % 2
		if len(byShard[shard]) == servicesPerShard {
			continue
		}
		byShard[shard] = append(byShard[shard], name)
		w.add(ns, name, fmt.Sprintf("10.10.0.%d", i+1))
	}
	replicas := startReplicas(t, ns, 2, append(args, fastLeader...)...)
	w.apply(t)
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		if n, err := count(ctx, t, "imported slices", ns); err != nil || n != 2*servicesPerShard {
			return fmt.Errorf("member2 has %d imported slices (%v), want %d", n, err, 2*servicesPerShard)
		}
		return nil
	})
	return byShard, replicas
}

// shardHolders returns, by shard of two, the index of the replica that
// holds it, once each holds one.
func shardHolders(t *testing.T, replicas []*controller) [2]int {
	t.Helper()
	var holder [2]int
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		holder = [2]int{-1, -1}
		for i, r := range replicas {
			m, err := getMetrics(ctx, r.metricsURL)
			if err != nil {
				return err
			}
			for shard := range holder {
				if m[series("leader_election_master_status", "name", shards.LeaseName(shard, 2))] == 1 {
					holder[shard] = i
				}
			}
		}
		if holder[0] < 0 || holder[1] < 0 || holder[0] == holder[1] {
			return fmt.Errorf("replicas holding shards 0 and 1: %v, want one each", holder)
		}
		return nil
	})
	return holder
}

// synced is how many syncs of a service the controller has completed.
func (c *controller) synced(t *testing.T) float64 {
	t.Helper()
	m, err := getMetrics(t.Context(), c.metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	return m[series("mcs_sync_svc_duration_seconds_count", "result", "success")]
}
