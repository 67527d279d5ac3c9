package chaos

import (
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Workload kinds beyond scales, export toggles and strategy flips: what a
// fleet's owners change besides replica counts.
const (
	Roll           = "roll"            // Service's Deployment in Cluster rolled out: new pods, new addresses, the old ones gone
	SetProvision   = "set-provision"   // MultiClusterService of Service: serviceProvisionClusters set to List
	SetConsumption = "set-consumption" // MultiClusterService of Service: serviceConsumptionClusters set to List
	RecreateMCS    = "recreate-mcs"    // MultiClusterService of Service deleted, and made again with its spec For later
)

// WorkloadKinds are every workload change, in the report's order.
var WorkloadKinds = []string{Scale, Roll, ToggleExport, FlipStrategy, SetProvision, SetConsumption, RecreateMCS}

// How long a deleted MultiClusterService stays gone: long enough for the
// controller to withdraw its imports, so that making it again imports anew.
const (
	minGone = 2 * time.Second
	maxGone = 15 * time.Second
)

// mcsChange is the workload change r draws for s, a MultiClusterService
// (r from 12 to 19; scale when the draw does not fit s).
func mcsChange(rng *rand.Rand, s Service, r int, scale Event, end time.Duration) Event {
	e := Event{At: scale.At, Service: s.Name}
	switch {
	case r < 14:
		e.Kind, e.List = SetProvision, provisionList(rng, s)
	case r < 15:
		e.Kind, e.List = SetConsumption, subset(rng, members, nil)
	case r < 18 && !s.LocalFirstPolicy:
		e.Kind = FlipStrategy
	case r == 19:
		e.Kind = RecreateMCS
		e.For = min(minGone+time.Duration(rng.Int64N(int64(maxGone-minGone))), end-scale.At)
	default:
		return scale
	}
	return e
}

// provisionList draws a provision list of s from the clusters that run its
// Service: none listed (every member that has the Service), one, some or
// all of them. A failover order may name listed clusters only (the CRD's
// rule), so s's order is always listed.
func provisionList(rng *rand.Rand, s Service) string {
	var must []string
	if s.LocalFirstPolicy {
		must = failoverOrder
	}
	return subset(rng, s.Providers, must)
}

// subset draws a subset of from, each subset alike, and adds must to a
// non-empty one; comma-separated, in from's order.
func subset(rng *rand.Rand, from, must []string) string {
	mask := rng.IntN(1 << len(from))
	var out []string
	for i, c := range from {
		if mask&(1<<i) != 0 || (mask != 0 && slices.Contains(must, c)) {
			out = append(out, c)
		}
	}
	return strings.Join(out, ",")
}

// clusterList is a comma-separated List as a spec's list: nil for none.
func clusterList(list string) []string {
	if list == "" {
		return nil
	}
	return strings.Split(list, ",")
}
