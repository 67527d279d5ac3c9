package chaos

import (
	"slices"
	"time"
)

// The membership faults (revoke-token, rejoin) act as a member's operator
// does, with kubectl mcs: the harness registers every member the way users
// do (kubectl mcs join: a Secret on the hub, the member's own account),
// and the model follows the registrations it reads on the hub (Sample.Away):
// a member unjoined provides and consumes nothing until it is joined again.

// holds are what fault e keeps to itself while it is under way: the
// schedule starts no other fault that holds one of them meanwhile.
func holds(e Event) []string {
	partition := "partition " + e.Cluster
	switch e.Kind {
	case Partition:
		return []string{partition}
	case RevokeToken, Rejoin:
		// join and unjoin write into the member, whose API server a
		// server fault would take away, and unjoin waits for the
		// controller to clean the member, which a partition would keep
		// it from until unjoin's timeout.
		return []string{e.Cluster, partition}
	}
	return []string{e.Cluster}
}

// membershipOverrun is how much longer than For a membership fault lasts:
// unjoin waits for the controller to clean the member (seconds; its
// timeout in the run is longer), and join takes a second or two.
const membershipOverrun = 10 * time.Second

// overrun is how long fault e may last past For, which the schedule keeps
// free of faults that hold what it holds.
func overrun(e Event) time.Duration {
	if e.Kind == RevokeToken || e.Kind == Rejoin {
		return membershipOverrun
	}
	return 0
}

// joined reports whether the hub registers member c (a Secret of it).
func (m Sample) joined(c string) bool { return !slices.Contains(m.Away, c) }

// allJoined adds a harness violation for each member the last sample has
// unregistered: a rejoin that did not heal leaves the run's numbers
// without that member, not to be trusted.
func (r *Result) allJoined(samples []Sample) {
	if len(samples) == 0 {
		return
	}
	last := samples[len(samples)-1]
	for _, c := range last.Away {
		r.Violations = append(r.Violations, Violation{Invariant: "harness", At: last.At,
			Detail: c + " is not joined at the end of the run: a rejoin or revoke-token did not heal, and the run's numbers are not to be trusted"})
	}
}
