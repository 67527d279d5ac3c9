// Package chaos runs the lab's fleet under a seeded schedule of workload
// changes and overlapping faults, probes every service's names through each
// consumer's coredns-mcs from outside, and checks invariants against the
// harness's own model of the source clusters (docs/reliability.md).
//
// The schedule, the model and the invariants are plain code with unit
// tests; the run itself (chaos_test.go, build tag lab) needs the lab.
package chaos

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// Kinds of events. Workload kinds change what the fleet should serve; fault
// kinds break a part of it for a while (For) or once (For 0).
const (
	Scale        = "scale"            // Service's Deployment in Cluster to Replicas
	ToggleExport = "toggle-export"    // ServiceExport of Service in Cluster deleted, or made again
	FlipStrategy = "flip-strategy"    // MultiClusterService of Service: RemoteAndLocal <-> LocalFirst
	FreezeAPI    = "freeze-apiserver" // SIGSTOP Cluster's kube-apiserver, SIGCONT after For
	StopAPI      = "stop-apiserver"   // stop Cluster's kube-apiserver, start it after For
	FreezeEtcd   = "freeze-etcd"      // SIGSTOP Cluster's etcd, SIGCONT after For
	StopEtcd     = "stop-etcd"        // stop Cluster's etcd, start it after For
	Partition    = "partition"        // packets between the controllers and member Cluster's API server dropped for For
	KillLeader   = "kill-leader"      // SIGKILL the leading controller replica; a new one starts at once
	KillCoreDNS  = "kill-coredns"     // delete a CoreDNS pod of Cluster at once (grace 0); member3's process SIGKILLed and started again
	DeleteOwned  = "delete-owned"     // delete what the controller wrote for Service in Cluster
	EditOwned    = "edit-owned"       // overwrite the addresses of an imported slice of Service in Cluster
	RevokeToken  = "revoke-token"     // delete member Cluster's account mcs-member (its tokens die), kubectl mcs join after For
	Rejoin       = "rejoin"           // kubectl mcs unjoin member Cluster, kubectl mcs join after For
)

// FaultKinds are every fault the harness can inject, the default mix.
var FaultKinds = []string{FreezeAPI, StopAPI, FreezeEtcd, StopEtcd, Partition, KillLeader, KillCoreDNS, DeleteOwned, EditOwned, RevokeToken, Rejoin}

// Event is one action of a schedule, at At from the run's start.
type Event struct {
	At       time.Duration `json:"at"`
	Kind     string        `json:"kind"`
	Cluster  string        `json:"cluster,omitempty"`
	Service  string        `json:"service,omitempty"`
	Replicas int           `json:"replicas,omitempty"`
	// List: the clusters a set-provision or set-consumption writes,
	// comma-separated; empty for none listed (every member).
	List string        `json:"list,omitempty"`
	For  time.Duration `json:"for,omitempty"`
}

// IsFault reports whether e breaks something rather than changes the workload.
func (e Event) IsFault() bool { return slices.Contains(FaultKinds, e.Kind) }

func (e Event) String() string {
	s := fmt.Sprintf("%8s %s", e.At.Round(time.Millisecond), e.Kind)
	for _, f := range []struct{ k, v string }{{"cluster", e.Cluster}, {"service", e.Service}} {
		if f.v != "" {
			s += " " + f.k + "=" + f.v
		}
	}
	switch e.Kind {
	case Scale:
		s += fmt.Sprintf(" replicas=%d", e.Replicas)
	case SetProvision, SetConsumption:
		s += " list=[" + e.List + "]"
	}
	if e.For > 0 {
		s += " for=" + e.For.Round(time.Millisecond).String()
	}
	return s
}

// Config is what a schedule is drawn from: the same Config gives the same
// schedule, event for event.
type Config struct {
	Seed     uint64        `json:"seed"`
	Duration time.Duration `json:"duration"`
	Faults   []string      `json:"faults"`
	// Rate is workload changes a second; FaultGap the mean time between
	// two faults' starts (they overlap when one lasts longer).
	Rate     float64       `json:"rate"`
	FaultGap time.Duration `json:"faultGap"`
	// Quiet ends the schedule early: its last stretch has no event, so
	// that every fault has healed and the fleet converged before the end.
	Quiet time.Duration `json:"quiet"`
	// Shards is the controllers' --shards (0 or 1: none). The schedule
	// does not depend on it: a seed replays the same with and without.
	Shards int `json:"shards,omitempty"`
}

// ParseFaults reads a comma-separated fault mix; "all" or "" is FaultKinds,
// "none" no fault.
func ParseFaults(s string) ([]string, error) {
	switch s {
	case "", "all":
		return slices.Clone(FaultKinds), nil
	case "none":
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(FaultKinds, f) {
			return nil, fmt.Errorf("FAULTS: unknown fault %q; known: %s", f, strings.Join(FaultKinds, ","))
		}
		out = append(out, f)
	}
	return out, nil
}

// Plan draws the schedule of cfg for world w, sorted by time. Only the seed
// decides it: what the run meets (an object missing, a server slow) changes
// what an event does, never which events come.
func Plan(cfg Config, w World) []Event {
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	end := cfg.Duration - cfg.Quiet
	var evs []Event
	if cfg.Rate > 0 {
		for at := expGap(rng, cfg.Rate); at < end; at += expGap(rng, cfg.Rate) {
			evs = append(evs, workloadEvent(rng, w, at, end))
		}
	}
	if len(cfg.Faults) > 0 && cfg.FaultGap > 0 {
		busy := map[string]time.Duration{} // what a fault holds -> when it heals
		for at := time.Duration(rng.ExpFloat64() * float64(cfg.FaultGap)); at < end; at += time.Duration(rng.ExpFloat64() * float64(cfg.FaultGap)) {
			e := faultEvent(rng, w, cfg.Faults, at, end)
			if e.For > 0 {
				// One server fault at a time in a cluster (labctl cannot
				// stop a frozen server), one partition at a time of a
				// member, and a member's token or registration taken only
				// while neither holds it (membership.go).
				keys := holds(e)
				if slices.ContainsFunc(keys, func(k string) bool { return busy[k] > at }) {
					continue
				}
				for _, k := range keys {
					busy[k] = at + e.For + overrun(e)
				}
			}
			evs = append(evs, e)
		}
	}
	slices.SortStableFunc(evs, func(a, b Event) int { return int(a.At - b.At) })
	return evs
}

func expGap(rng *rand.Rand, rate float64) time.Duration {
	return time.Duration(rng.ExpFloat64() / rate * float64(time.Second))
}

func workloadEvent(rng *rand.Rand, w World, at, end time.Duration) Event {
	s := w.Services[rng.IntN(len(w.Services))]
	// Scaling is the commonest change, then rollouts, as pods come and go
	// in a fleet.
	scale := Event{At: at, Kind: Scale, Service: s.Name, Cluster: s.Providers[rng.IntN(len(s.Providers))], Replicas: rng.IntN(4)}
	switch r := rng.IntN(20); {
	case r < 9:
		return scale
	case r < 12:
		return Event{At: at, Kind: Roll, Service: s.Name, Cluster: scale.Cluster}
	case !s.MCS && r < 16:
		return Event{At: at, Kind: ToggleExport, Service: s.Name, Cluster: scale.Cluster}
	case s.MCS:
		return mcsChange(rng, s, r, scale, end)
	}
	return scale
}

// Fault durations: long enough for a source Lease to expire (the run's
// Leases last 6 s), short enough that faults overlap rather than queue.
const (
	minFault = 2 * time.Second
	maxFault = 20 * time.Second
)

func faultEvent(rng *rand.Rand, w World, kinds []string, at, end time.Duration) Event {
	e := Event{At: at, Kind: kinds[rng.IntN(len(kinds))]}
	switch e.Kind {
	case FreezeAPI, StopAPI, FreezeEtcd, StopEtcd:
		e.Cluster = w.APIClusters[rng.IntN(len(w.APIClusters))]
		e.For = min(minFault+time.Duration(rng.Int64N(int64(maxFault-minFault))), end-at)
	case Partition, RevokeToken, Rejoin:
		e.Cluster = members[rng.IntN(len(members))]
		e.For = min(minFault+time.Duration(rng.Int64N(int64(maxFault-minFault))), end-at)
	case KillCoreDNS:
		// Every member's CoreDNS: member3's process as well as the pods.
		e.Cluster = members[rng.IntN(len(members))]
	case DeleteOwned, EditOwned:
		s := w.Services[rng.IntN(len(w.Services))]
		e.Service = s.Name
		e.Cluster = s.Consumers[rng.IntN(len(s.Consumers))]
	}
	return e
}
