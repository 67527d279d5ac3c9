package chaos

import (
	"slices"
	"testing"
)

// A replica's metrics name the Leases it holds, with shards or without;
// the others' series and Leases it does not hold are left out.
func TestHeldLeases(t *testing.T) {
	metrics := `# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.
leader_election_master_status{name="mcs-controller-shard-0"} 1
leader_election_master_status{name="mcs-controller-shard-1"} 0
leader_election_master_status{name="mcs-controller-shard-2"} 1
leader_election_master_status{name="other"} 1
mcs_writes_total{cluster="hub"} 1`
	if got := heldLeases(metrics); !slices.Equal(got, []string{"mcs-controller-shard-0", "mcs-controller-shard-2"}) {
		t.Fatalf("held %v; want shards 0 and 2", got)
	}
	if got := heldLeases(`leader_election_master_status{name="mcs-controller"} 1`); !slices.Equal(got, []string{"mcs-controller"}) {
		t.Fatalf("held %v; want the Lease of no shards", got)
	}
}

// kill-leader kills the holder of the shard its event names, else any
// holder; with shards a run keeps a replica more than shards.
func TestVictim(t *testing.T) {
	held := [][]string{nil, {"mcs-controller-shard-0"}, {"mcs-controller-shard-1", "mcs-controller-shard-2"}}
	if i := victim(held, "mcs-controller-shard-2"); i != 2 {
		t.Errorf("victim of shard 2 = %d, want its holder 2", i)
	}
	if i := victim(held[:2], "mcs-controller-shard-2"); i != 1 {
		t.Errorf("victim of shard 2, held by none = %d, want the first holder, 1", i)
	}
	if i := victim([][]string{nil, nil}, "mcs-controller"); i != -1 {
		t.Errorf("victim when none leads = %d, want -1", i)
	}
	if replicasFor(1) != 2 || replicasFor(0) != 2 || replicasFor(2) != 3 {
		t.Errorf("replicas for 1, 0, 2 shards: %d, %d, %d; want 2, 2, 3", replicasFor(1), replicasFor(0), replicasFor(2))
	}
}
