package chaos

import (
	"slices"
	"testing"
	"time"
)

func testConfig(seed uint64) Config {
	return Config{Seed: seed, Duration: 5 * time.Minute, Faults: FaultKinds, Rate: 3, FaultGap: 10 * time.Second, Quiet: 40 * time.Second}
}

// The seed alone decides the schedule: the same seed gives it event for
// event, another seed another one.
func TestPlanReplaysSeed(t *testing.T) {
	w := NewWorld(20)
	a, b := Plan(testConfig(47), w), Plan(testConfig(47), w)
	if !slices.Equal(a, b) {
		t.Fatal("two plans of seed 47 differ")
	}
	if c := Plan(testConfig(48), w); slices.Equal(a, c) {
		t.Fatal("seeds 47 and 48 gave the same plan")
	}
}

// A plan has workload at about Rate changes a second, every fault kind of
// the mix, faults overlapping, none in the quiet end, and never two
// server faults on one cluster, or two partitions of a member, at once,
// nor a member's token or registration taken while either holds it.
func TestPlanShape(t *testing.T) {
	cfg := testConfig(1)
	cfg.Duration = 20 * time.Minute // every kind, whatever the draw
	evs := Plan(cfg, NewWorld(20))
	kinds := map[string]int{}
	busy := map[string]time.Duration{}
	overlaps := 0
	var faultEnd time.Duration
	for _, e := range evs {
		kinds[e.Kind]++
		if e.At >= cfg.Duration-cfg.Quiet {
			t.Errorf("%v is in the quiet end", e)
		}
		if !e.IsFault() {
			continue
		}
		if e.At < faultEnd {
			overlaps++
		}
		faultEnd = max(faultEnd, e.At+e.For)
		if e.For > 0 {
			keys := []string{e.Cluster}
			switch e.Kind {
			case Partition:
				keys = []string{"partition " + e.Cluster}
			case RevokeToken, Rejoin:
				keys = append(keys, "partition "+e.Cluster)
			}
			for _, key := range keys {
				if busy[key] > e.At {
					t.Errorf("%v starts while %s is still held by another fault", e, key)
				}
				busy[key] = e.At + e.For
			}
		}
	}
	work := 0
	for _, k := range WorkloadKinds {
		work += kinds[k]
	}
	if want := cfg.Rate * (cfg.Duration - cfg.Quiet).Seconds(); float64(work) < want*0.8 || float64(work) > want*1.2 {
		t.Errorf("%d workload events, want about %.0f", work, want)
	}
	for _, k := range append(slices.Clone(WorkloadKinds), FaultKinds...) {
		if kinds[k] == 0 {
			t.Errorf("no %s in the plan: %v", k, kinds)
		}
	}
	if overlaps == 0 {
		t.Error("no fault overlaps another")
	}
}

// Workload events only act on what the world has: a provider's
// Deployment, an export of a ServiceExport service, a strategy of a
// MultiClusterService without a LocalFirst policy, a provision list of
// clusters that run the Service (the failover order among them), a
// consumption list of members; a MultiClusterService is made again before
// the quiet end.
func TestPlanFitsWorld(t *testing.T) {
	w := NewWorld(20)
	cfg := testConfig(7)
	for _, e := range Plan(cfg, w) {
		s, ok := w.Service(e.Service)
		switch e.Kind {
		case Scale:
			if !ok || !slices.Contains(s.Providers, e.Cluster) || e.Replicas < 0 || e.Replicas > 3 {
				t.Errorf("%v: not a provider's Deployment", e)
			}
		case ToggleExport:
			if !ok || s.MCS || !slices.Contains(s.Providers, e.Cluster) {
				t.Errorf("%v: not an export of a provider", e)
			}
		case FlipStrategy:
			if !ok || !s.MCS || s.LocalFirstPolicy {
				t.Errorf("%v: not a MultiClusterService's plain strategy", e)
			}
		case Roll:
			if !ok || !slices.Contains(s.Providers, e.Cluster) {
				t.Errorf("%v: not a provider's Deployment", e)
			}
		case SetProvision:
			list := clusterList(e.List)
			if !ok || !s.MCS || !subsetOf(list, s.Providers) || (len(list) > 0 && s.LocalFirstPolicy && !subsetOf(failoverOrder, list)) {
				t.Errorf("%v: not a provision list of %v", e, s.Providers)
			}
		case SetConsumption:
			if !ok || !s.MCS || !subsetOf(clusterList(e.List), members) {
				t.Errorf("%v: not a consumption list", e)
			}
		case RecreateMCS:
			if !ok || !s.MCS || e.For <= 0 || e.For > maxGone || e.At+e.For > cfg.Duration-cfg.Quiet {
				t.Errorf("%v: not a MultiClusterService gone for a while before the quiet end", e)
			}
		case DeleteOwned, EditOwned:
			if !ok || !slices.Contains(s.Consumers, e.Cluster) {
				t.Errorf("%v: not a consumer's import", e)
			}
		}
	}
}

func TestParseFaults(t *testing.T) {
	if f, err := ParseFaults(""); err != nil || !slices.Equal(f, FaultKinds) {
		t.Errorf(`"" = %v, %v; want every kind`, f, err)
	}
	if f, err := ParseFaults("none"); err != nil || len(f) != 0 {
		t.Errorf(`"none" = %v, %v; want none`, f, err)
	}
	if f, err := ParseFaults("kill-leader, stop-apiserver"); err != nil || !slices.Equal(f, []string{KillLeader, StopAPI}) {
		t.Errorf("a list = %v, %v", f, err)
	}
	if _, err := ParseFaults("kill-leader,reboot"); err == nil {
		t.Error(`"reboot" was taken`)
	}
}

func subsetOf(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
