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
			FaultsApplied: map[string]int{KillCoreDNS: 1}, QuietWrites: 2, QuietWindow: 10 * time.Second, Convergence: map[string]Stats{KillCoreDNS: {N: 1, P50: 1.5, P99: 1.5, Max: 1.5}},
			Violations: []Violation{{Invariant: "available", At: 12 * time.Second, Service: "s", Consumer: member2, Detail: "native name: 0 answers", LastFault: "kill-coredns member2 at 1s"}}},
		Missing: []string{"owned"}}
	md := r.Markdown()
	for _, want := range []string{
		"seed 47", "SEED=47 DURATION=5m0s", "| kill-coredns | 1 | 0 | 1 | 0.0 / 0.0 | 1, 1.5 / 1.5 / 1.5 | 0 | 0 |", "| stop-etcd | 0 | 0 | 0 | 0.0 / 0.0 | 0 | 0 | 0 |",
		"| available | 10 probes, 8 the model said must answer, 2 misses (1 in a fault's window) | 1 |",
		"| lean | 2 writes other than Leases in the quiet last 10s; memory below | 0 |",
		"| 12s | available | s | member2 | native name: 0 answers | kill-coredns member2 at 1s |", "- owned",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}

func TestHistoryAround(t *testing.T) {
	applied := []Applied{
		{Event: Event{At: time.Second, Kind: Scale, Service: "s", Cluster: member1, Replicas: 2}, Start: time.Second},
		{Event: Event{At: 9 * time.Second, Kind: StopAPI, Cluster: member2, For: 3 * time.Second}, Start: 9 * time.Second, Heal: 13 * time.Second},
		{Event: Event{At: 10 * time.Second, Kind: KillCoreDNS, Cluster: member2}, Start: 10 * time.Second, Err: "connection refused"},
		{Event: Event{At: 20 * time.Second, Kind: Scale, Service: "s", Cluster: member1}, Start: 20 * time.Second},
	}
	got := HistoryAround(applied, 11*time.Second, 5*time.Second, 2*time.Second)
	want := "      9s stop-apiserver cluster=member2 for=3s (began 9s, healed 13s)\n" +
		"     10s kill-coredns cluster=member2 (began 10s, healed 0s, failed: connection refused)\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
