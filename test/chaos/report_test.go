package chaos

import (
	"strings"
	"testing"
	"time"
)

// The report names the seed, how to replay it, each invariant's number and
// each violation with its time and the fault before it.
func TestMarkdown(t *testing.T) {
	r := Report{Config: testConfig(47), Limits: testLimits, World: oneService, Ran: time.Minute,
		Result: Result{Probes: 10, Checked: 8, Misses: 2, Excused: map[string]int{KillCoreDNS: 1},
			FaultsApplied: map[string]int{KillCoreDNS: 1}, Convergence: map[string]Stats{KillCoreDNS: {N: 1, P50: 1.5, P99: 1.5, Max: 1.5}},
			Violations: []Violation{{Invariant: "available", At: 12 * time.Second, Service: "s", Consumer: member2, Detail: "native name: 0 answers", LastFault: "kill-coredns member2 at 1s"}}},
		Missing: []string{"owned"}}
	md := r.Markdown()
	for _, want := range []string{
		"seed 47", "SEED=47 DURATION=5m0s", "| kill-coredns | 1 | 0 | 1 | 1.5 / 1.5 / 1.5 | 0 | 0 |",
		"| available | 10 probes, 8 the model said must answer, 2 misses (1 in a fault's window) | 1 |",
		"| 12s | available | s | member2 | native name: 0 answers | kill-coredns member2 at 1s |", "- owned",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
