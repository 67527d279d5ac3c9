package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
)

var oneService = World{Services: []Service{{Name: "s", MCS: true, Strategy: api.RemoteAndLocal, Providers: []string{member1}, Consumers: []string{member2}}}}

var testLimits = Limits{Settle: 5 * time.Second, Grace: 10 * time.Second, Converge: 20 * time.Second}

// sampleAt is member1 serving s with addr, and member2 importing imported
// from it (nil: no import at all).
func sampleAt(at time.Duration, imported []string) Sample {
	m := Sample{At: at, Up: map[string]bool{hub: true, member1: true, member2: true, member3: true},
		Ready: map[string]map[string][]string{"s": {member1: {"10.10.0.1"}}}, All: map[string]map[string][]string{"s": {member1: {"10.10.0.1"}}},
		MCS: map[string]bool{"s": true}, Imports: map[string][]string{}, Imported: map[string]map[string]map[string][]string{}}
	if imported != nil {
		m.Imports[member2] = []string{"s"}
		m.Imported[member2] = map[string]map[string][]string{"s": {member1: imported}}
	}
	return m
}

// samples are one a second from 0 to end, matched except in [from, to).
func samples(end, from, to time.Duration) []Sample {
	var out []Sample
	for at := time.Duration(0); at <= end; at += time.Second {
		imported := []string{"10.10.0.1"}
		if at >= from && at < to {
			imported = []string{"10.99.99.99"}
		}
		out = append(out, sampleAt(at, imported))
	}
	return out
}

func miss(at time.Duration) Probe {
	return Probe{At: at, Consumer: member2, Service: "s", Name: "native", Rcode: "NXDOMAIN"}
}

func fault(kind string, start, heal time.Duration) Applied {
	return Applied{Event: Event{Kind: kind, Cluster: member2}, Start: start, Heal: heal}
}

func TestMissOutsideAFaultIsAViolation(t *testing.T) {
	ss := samples(60*time.Second, -1, -1)
	probes := []Probe{miss(30 * time.Second), {At: 31 * time.Second, Consumer: member2, Service: "s", Name: "native", Answers: 1}}
	r := Check(oneService, testLimits, ss, probes, []Applied{fault(KillCoreDNS, 40*time.Second, 40*time.Second)}, nil, nil)
	if r.Checked != 2 || r.Misses != 1 || len(r.Violations) != 1 || r.Violations[0].Invariant != "available" {
		t.Fatalf("checked %d, misses %d, violations %+v; want 2, 1 and one of available", r.Checked, r.Misses, r.Violations)
	}
}

func TestMissWithinAFaultsWindowIsExcused(t *testing.T) {
	ss := samples(60*time.Second, -1, -1)
	// 30 s is 9 s after the fault healed, within the grace of 10 s.
	r := Check(oneService, testLimits, ss, []Probe{miss(30 * time.Second)}, []Applied{fault(FreezeAPI, 15*time.Second, 21*time.Second)}, nil, nil)
	if len(r.Violations) != 0 || r.Excused[FreezeAPI] != 1 || len(r.ExcusedMisses) != 1 {
		t.Fatalf("violations %+v, excused %v; want none and one of %s", r.Violations, r.Excused, FreezeAPI)
	}
}

// A miss right after the model changed (within Settle) is no miss: the
// change is still propagating.
func TestMissWhileTheModelSettlesIsNotChecked(t *testing.T) {
	var ss []Sample
	for at := time.Duration(0); at <= 60*time.Second; at += time.Second {
		m := sampleAt(at, []string{"10.10.0.1"})
		if at < 28*time.Second {
			m.Ready["s"][member1] = nil // scaled to zero until 28 s
		}
		ss = append(ss, m)
	}
	r := Check(oneService, testLimits, ss, []Probe{miss(30 * time.Second), miss(40 * time.Second)}, nil, nil, nil)
	if r.Checked != 1 || len(r.Violations) != 1 || r.Violations[0].At != 40*time.Second {
		t.Fatalf("checked %d, violations %+v; want the miss at 40 s only", r.Checked, r.Violations)
	}
}

func TestConvergenceAfterAFault(t *testing.T) {
	ss := samples(60*time.Second, 10*time.Second, 23*time.Second)
	r := Check(oneService, testLimits, ss, nil, []Applied{fault(StopAPI, 10*time.Second, 20*time.Second)}, nil, nil)
	st := r.Convergence[StopAPI]
	if st.N != 1 || st.Max != 3 || len(r.Violations) != 0 {
		t.Fatalf("convergence %+v, violations %+v; want one of 3 s and none", st, r.Violations)
	}
	for i := range ss {
		ss[i].Up[member3] = ss[i].At >= 22*time.Second // read again 2 s after the heal
	}
	r = Check(oneService, testLimits, ss, nil, []Applied{fault(StopAPI, 10*time.Second, 20*time.Second)}, nil, nil)
	if st := r.Convergence[StopAPI]; st.BackMax != 2 || st.Max != 3 {
		t.Fatalf("convergence %+v; want every cluster read 2 s after the heal, converged 3 s after", st)
	}
}

func TestDifferenceOutsideFaultsIsAViolation(t *testing.T) {
	ss := samples(60*time.Second, 10*time.Second, 40*time.Second)
	r := Check(oneService, testLimits, ss, nil, nil, nil, nil)
	if len(r.Violations) != 1 || r.Violations[0].Invariant != "converged" || !strings.Contains(r.Violations[0].Detail, "10.99.99.99") {
		t.Fatalf("violations %+v; want one of converged naming the address", r.Violations)
	}
	r = Check(oneService, testLimits, samples(60*time.Second, 50*time.Second, 70*time.Second), nil, nil, nil, nil)
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "end of the run") {
		t.Fatalf("violations %+v; want the difference at the end", r.Violations)
	}
}

func TestNotConvergedAfterAFault(t *testing.T) {
	ss := samples(60*time.Second, 10*time.Second, 55*time.Second)
	r := Check(oneService, testLimits, ss, nil, []Applied{fault(DeleteOwned, 10*time.Second, 10*time.Second)}, nil, nil)
	if r.Convergence[DeleteOwned].NotConverged != 1 {
		t.Fatalf("convergence %+v; want not converged", r.Convergence)
	}
}

func TestAlive(t *testing.T) {
	exits := []Exit{{At: time.Second, Process: "mcs-controller", Injected: true}, {At: 2 * time.Second, Process: "mcs-controller", Detail: "F1129 exiting"}}
	r := Check(oneService, testLimits, nil, nil, nil, exits, []string{"01-coredns.log: panic: boom"})
	if r.Injected != 1 || r.NotInjected != 1 || len(r.Violations) != 2 {
		t.Fatalf("injected %d, not %d, violations %+v; want 1, 1 and 2", r.Injected, r.NotInjected, r.Violations)
	}
}

// A fault that heals into another one's window is not blamed for the time
// the other one took.
func TestConvergenceOverlapped(t *testing.T) {
	ss := samples(60*time.Second, 10*time.Second, 50*time.Second)
	faults := []Applied{fault(DeleteOwned, 10*time.Second, 10*time.Second), fault(StopAPI, 15*time.Second, 35*time.Second)}
	r := Check(oneService, testLimits, ss, nil, faults, nil, nil)
	if st := r.Convergence[DeleteOwned]; st.Overlapped != 1 || st.NotConverged != 0 {
		t.Fatalf("convergence %+v; want one overlapped", r.Convergence)
	}
	if st := r.Convergence[StopAPI]; st.N != 1 || st.Max != 15 {
		t.Fatalf("convergence %+v; want 15 s after the stop", r.Convergence)
	}
}

// A fault whose convergence another fault interrupts gets no time of its
// own, even under the limit: seed 47's hub etcd stop was put down at 25 s,
// of which member3's etcd, stopped 0.2 s after the hub's healed, took 15.
func TestConvergenceInterruptedUnderTheLimit(t *testing.T) {
	ss := samples(60*time.Second, 10*time.Second, 25*time.Second)
	faults := []Applied{fault(StopEtcd, 5*time.Second, 10*time.Second), fault(StopEtcd, 11*time.Second, 22*time.Second)}
	r := Check(oneService, testLimits, ss, nil, faults, nil, nil)
	if st := r.Convergence[StopEtcd]; st.Overlapped != 1 || st.N != 1 || st.Max != 3 || len(r.Violations) != 0 {
		t.Fatalf("convergence %+v, violations %+v; want the first overlapped and the second 3 s", r.Convergence, r.Violations)
	}
}

// A replica that exits on losing the lead while the hub is faulted does so
// by design; without a hub fault it is a violation.
func TestAliveLostLead(t *testing.T) {
	exits := []Exit{{At: 3 * time.Second, Process: "mcs-controller", Detail: lostLead + " so that a fresh replica takes over"},
		{At: 40 * time.Second, Process: "mcs-controller", Detail: lostLead + " so that a fresh replica takes over"}}
	hubDown := Applied{Event: Event{Kind: StopAPI, Cluster: hub}, Start: 1 * time.Second, Heal: 5 * time.Second}
	r := Check(oneService, testLimits, samples(60*time.Second, -1, -1), nil, []Applied{hubDown}, exits, nil)
	if r.LostLead != 1 || r.NotInjected != 1 || len(r.Violations) != 1 || r.Violations[0].At != 40*time.Second {
		t.Fatalf("lost lead %d, not injected %d, violations %+v; want the exit at 40 s only", r.LostLead, r.NotInjected, r.Violations)
	}
}

// A consumer or provider the harness could not read is not judged.
func TestUnknownIsNotJudged(t *testing.T) {
	ss := samples(60*time.Second, 10*time.Second, 61*time.Second)
	for i := range ss {
		if ss[i].At >= 10*time.Second {
			ss[i].Up[member1] = false
		}
	}
	if r := Check(oneService, testLimits, ss, nil, nil, nil, nil); len(r.Violations) != 0 {
		t.Fatalf("violations %+v; want none while member1 is not read", r.Violations)
	}
	w := oneService
	w.APIClusters = []string{member1}
	if r := Check(w, testLimits, ss, nil, nil, nil, nil); len(r.Violations) != 1 || r.Violations[0].Invariant != "harness" {
		t.Fatalf("violations %+v; want the harness's, member1 down at the end", r.Violations)
	}
}

// A change of the service by the harness, or one that only the next
// sample shows, is propagating: no miss is checked until it settled.
func TestMissWhileAChangePropagatesIsNotChecked(t *testing.T) {
	ss := samples(60*time.Second, -1, -1)
	scale := Applied{Event: Event{Kind: Scale, Service: "s", Cluster: member1}, Start: 28500 * time.Millisecond}
	r := Check(oneService, testLimits, ss, []Probe{miss(30 * time.Second), miss(40 * time.Second)}, []Applied{scale}, nil, nil)
	if r.Checked != 1 || len(r.Violations) != 1 || r.Violations[0].At != 40*time.Second {
		t.Fatalf("checked %d, violations %+v; want the miss at 40 s only", r.Checked, r.Violations)
	}
	ss[31].Ready["s"] = map[string][]string{} // the next sample after 30.5 s has nothing ready
	r = Check(oneService, testLimits, ss, []Probe{miss(30500 * time.Millisecond)}, nil, nil, nil)
	if r.Checked != 0 {
		t.Fatalf("checked %d, want none: the sample after the miss has nothing ready", r.Checked)
	}
}

// A miss is put down to the fault that touched its service or consumer,
// not to whichever began last.
func TestMissPutDownToItsFault(t *testing.T) {
	ss := samples(60*time.Second, -1, -1)
	edit := Applied{Event: Event{Kind: DeleteOwned, Cluster: member2, Service: "s"}, Start: 28 * time.Second, Heal: 28 * time.Second}
	other := Applied{Event: Event{Kind: StopAPI, Cluster: member3}, Start: 29 * time.Second, Heal: 40 * time.Second}
	r := Check(oneService, testLimits, ss, []Probe{miss(30 * time.Second)}, []Applied{other, edit}, nil, nil)
	if r.Excused[DeleteOwned] != 1 || len(r.ExcusedMisses) != 1 || !strings.HasPrefix(r.ExcusedMisses[0].LastFault, "delete-owned member2s") {
		t.Fatalf("excused %v %+v; want the miss put down to delete-owned", r.Excused, r.ExcusedMisses)
	}
}
