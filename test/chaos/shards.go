package chaos

import (
	"slices"
	"strings"

	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// replicasFor is how many controller replicas a run with shards (its
// --shards) keeps: a leader and a standby without shards; with N, a
// replica for each shard and a standby, as a Deployment sized for its
// shards has: a killed holder's shard then has a replica that holds none
// campaigning for it besides the other holders (docs/scaling.md).
func replicasFor(shards int) int {
	if shards <= 1 {
		return 2
	}
	return shards + 1
}

// heldLeases are the controller Leases a replica's metrics say it holds:
// mcs-controller without shards, mcs-controller-shard-<i> with them.
func heldLeases(metrics string) []string {
	var out []string
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, "leader_election_master_status{") || !strings.HasSuffix(line, " 1") {
			continue
		}
		_, rest, ok := strings.Cut(line, `name="`)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, `"`)
		// Every shard's Lease name begins with the one of no shards.
		if strings.HasPrefix(name, shards.LeaseName(0, 1)) {
			out = append(out, name)
		}
	}
	return out
}

// victim is the replica a kill-leader kills, by the Leases each holds: the
// holder of lease (the shard the event names), else the first that holds
// any; -1 when none does.
func victim(held [][]string, lease string) int {
	if i := slices.IndexFunc(held, func(h []string) bool { return slices.Contains(h, lease) }); i >= 0 {
		return i
	}
	return slices.IndexFunc(held, func(h []string) bool { return len(h) > 0 })
}
