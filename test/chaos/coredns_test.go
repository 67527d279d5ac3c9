package chaos

import (
	"slices"
	"testing"
	"time"
)

// kill-coredns hits every member's CoreDNS: member3's coredns-mcs, a
// process beside the lab, as well as member1's and member2's pods.
func TestKillCoreDNSHitsEveryMember(t *testing.T) {
	cfg := testConfig(1)
	cfg.Duration, cfg.Faults = 20*time.Minute, []string{KillCoreDNS}
	hit := map[string]int{}
	for _, e := range Plan(cfg, NewWorld(20)) {
		if e.Kind == KillCoreDNS {
			hit[e.Cluster]++
		}
	}
	for _, m := range members {
		if hit[m] == 0 {
			t.Errorf("kill-coredns never hits %s in 20 minutes: %v", m, hit)
		}
	}
	for c := range hit {
		if !slices.Contains(members, c) {
			t.Errorf("kill-coredns hits %s, not a member", c)
		}
	}
}
