package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Probe is one DNS answer a consumer gave the harness.
type Probe struct {
	At       time.Duration `json:"at"`
	Consumer string        `json:"consumer"`
	Service  string        `json:"service"`
	Name     string        `json:"name"` // native or clusterset
	Answers  int           `json:"answers"`
	Rcode    string        `json:"rcode,omitempty"`
	Err      string        `json:"err,omitempty"`
}

// Applied is an event of the schedule as the run carried it out: when it
// began and, for a fault, when it healed; Err when it could not be done.
type Applied struct {
	Event
	Start time.Duration `json:"start"`
	Heal  time.Duration `json:"heal"`
	Err   string        `json:"err,omitempty"`
}

// Exit is a process of the fleet that ended; Injected when a fault ended it.
type Exit struct {
	At       time.Duration `json:"at"`
	Process  string        `json:"process"`
	Injected bool          `json:"injected"`
	Detail   string        `json:"detail,omitempty"`
}

// Limits are the stated windows of the invariants.
type Limits struct {
	// Settle: how long the model must have held still before a miss
	// counts (a workload change's propagation).
	Settle time.Duration `json:"settle"`
	// Grace: how long after a fault healed its misses and mismatches are
	// excused (source Lease duration plus propagation).
	Grace time.Duration `json:"grace"`
	// Converge: how long a consumer may differ from the model outside any
	// fault's window, and how long after a fault healed it must match.
	Converge time.Duration `json:"converge"`
}

// Violation is one breach of an invariant.
type Violation struct {
	Invariant string        `json:"invariant"`
	At        time.Duration `json:"at"`
	Service   string        `json:"service,omitempty"`
	Consumer  string        `json:"consumer,omitempty"`
	Detail    string        `json:"detail"`
	// LastFault is the fault that began last before At, for the history.
	LastFault string `json:"lastFault,omitempty"`
}

// Stats are percentiles of durations, in seconds.
type Stats struct {
	N            int     `json:"n"`
	P50          float64 `json:"p50"`
	P99          float64 `json:"p99"`
	Max          float64 `json:"max"`
	NotConverged int     `json:"notConverged"`
	// BackP50 and BackMax: how long after the heal the harness could read
	// every cluster again (an API server's own recovery, which no
	// controller can beat); the times above include it.
	BackP50 float64 `json:"backP50"`
	BackMax float64 `json:"backMax"`
	// Overlapped: another fault was under way before the fleet converged
	// after this one healed: the time is not this fault's own, so it is
	// counted here and not in the percentiles, and is no violation by
	// itself (a difference outside every fault's window still is one).
	Overlapped int `json:"overlapped"`
}

// Result is the invariants' numbers.
type Result struct {
	Probes  int            `json:"probes"`
	Checked int            `json:"checked"` // probes the model said must answer
	Misses  int            `json:"misses"`
	Excused map[string]int `json:"excused"` // misses within a fault's window, by fault kind
	// ExcusedMisses are those misses (the first maxListed), to read what
	// a fault\'s window hides.
	ExcusedMisses []Violation      `json:"excusedMisses"`
	Convergence   map[string]Stats `json:"convergence"`
	LostLead      int              `json:"lostLeadExits"` // exits on losing the lead while the hub was faulted
	Injected      int              `json:"injectedExits"`
	NotInjected   int              `json:"notInjectedExits"`
	// QuietWrites: the controller's writes other than Leases' in the
	// quiet run's last QuietWindow (lean.go).
	QuietWrites   int            `json:"quietWrites"`
	QuietWindow   time.Duration  `json:"quietWindow"`
	Panics        []string       `json:"panics"`
	Violations    []Violation    `json:"violations"`
	FaultsApplied map[string]int `json:"faultsApplied"`
	FaultsFailed  map[string]int `json:"faultsFailed"`
	// Ownership: the owned invariant's numbers (owned.go); nil when no
	// audit log was read.
	Ownership *OwnedStats `json:"owned,omitempty"`

	// Memory: each component's peak RSS against its limit (memory.go).
	Memory map[string]MemStats `json:"memory,omitempty"`

	// Workload and WorkloadFailed: changes by kind, carried out and not
	// (an API server that did not answer, an object gone).
	Workload       map[string]int `json:"workload"`
	WorkloadFailed map[string]int `json:"workloadFailed"`
}

func (r *Result) countWorkload(a Applied) {
	if a.Err != "" {
		r.WorkloadFailed[a.Kind]++
		return
	}
	r.Workload[a.Kind]++
}

// Check computes the invariants of a run's history.
func Check(w World, lim Limits, samples []Sample, probes []Probe, applied []Applied, exits []Exit, panics []string) Result {
	r := Result{Probes: len(probes), Excused: map[string]int{}, Convergence: map[string]Stats{},
		FaultsApplied: map[string]int{}, FaultsFailed: map[string]int{}, Workload: map[string]int{}, WorkloadFailed: map[string]int{}, Panics: panics}
	var faults []Applied
	changes := map[string][]span{} // service -> its workload changes, from start to done
	for _, a := range applied {
		if !a.IsFault() {
			changes[a.Service] = append(changes[a.Service], span{a.Start, max(a.Start, a.Heal)})
			r.countWorkload(a)
			continue
		}
		if a.Err != "" {
			r.FaultsFailed[a.Kind]++
			continue
		}
		r.FaultsApplied[a.Kind]++
		faults = append(faults, a)
	}
	h := history{w: w, lim: lim, samples: samples, faults: faults, changes: changes}
	r.available(h, probes)
	r.converged(h)
	for _, e := range exits {
		switch {
		case e.Injected:
			r.Injected++
			continue
		case strings.Contains(e.Detail, lostLead) && h.hubFaultAt(e.At):
			// The controller's design: a replica that lost the lead
			// exits, and a fresh one takes over.
			r.LostLead++
			continue
		}
		r.NotInjected++
		r.Violations = append(r.Violations, Violation{Invariant: "alive", At: e.At, Detail: e.Process + " exited: " + e.Detail, LastFault: h.lastFault(e.At)})
	}
	if n := len(samples); n > 0 {
		for _, c := range w.APIClusters {
			if !samples[n-1].Up[c] {
				r.Violations = append(r.Violations, Violation{Invariant: "harness", At: samples[n-1].At,
					Detail: c + "'s API server does not answer at the end of the run: a fault did not heal, and the run's numbers are not to be trusted"})
			}
		}
	}
	r.allJoined(samples)
	for _, p := range panics {
		r.Violations = append(r.Violations, Violation{Invariant: "alive", Detail: p})
	}
	sort.SliceStable(r.Violations, func(i, j int) bool { return r.Violations[i].At < r.Violations[j].At })
	return r
}

type history struct {
	w       World
	lim     Limits
	samples []Sample
	faults  []Applied
	changes map[string][]span
}

// span is a workload change's time, from its start to when it was done: a
// MultiClusterService made again changes what is served at the end.
type span struct{ from, to time.Duration }

// maxListed bounds the excused misses a report lists.
const maxListed = 200

// lostLead is what mcs-controller logs when it exits on losing the lead.
const lostLead = "Lost the lead: exiting"

// hubFaultAt reports whether a fault of the hub, or of the controllers'
// way to it, was under way (its window) at t.
func (h history) hubFaultAt(t time.Duration) bool {
	for _, f := range h.faults {
		if f.Cluster == hub && t >= f.Start && t <= f.Heal+h.lim.Grace {
			return true
		}
	}
	return false
}

// excusedBy is the fault whose window, from its start to Grace after it
// healed, holds t, the one that touched service s or cluster c first
// (a hand edit of s, a fault of c), else the last begun; false when none.
func (h history) excusedBy(t time.Duration, s, c string) (Applied, bool) {
	var best Applied
	rank := -1
	for _, f := range h.faults {
		if t < f.Start || t > f.Heal+h.lim.Grace {
			continue
		}
		r := 0
		if f.Cluster == c {
			r = 1
		}
		if f.Service == s && s != "" {
			r += 2
		}
		if r > rank || (r == rank && f.Start > best.Start) {
			best, rank = f, r
		}
	}
	return best, rank >= 0
}

func describe(f Applied) string {
	return fmt.Sprintf("%s %s%s at %s", f.Kind, f.Cluster, f.Service, f.Start.Round(time.Millisecond))
}

func (h history) lastFault(t time.Duration) string {
	last := ""
	for _, f := range h.faults {
		if f.Start <= t {
			last = describe(f)
		}
	}
	return last
}

// mustAnswer reports whether s must answer in c at t: no change of s by
// the harness was under way in the Settle before t, and every sample from the last one
// before that stretch to the first one after t says s is served to c (a
// change between two samples shows in the later one).
func (h history) mustAnswer(s Service, c string, t time.Duration) bool {
	for _, c := range h.changes[s.Name] {
		if c.to > t-h.lim.Settle && c.from <= t {
			return false
		}
	}
	from := t - h.lim.Settle
	i := sort.Search(len(h.samples), func(i int) bool { return h.samples[i].At > from })
	if i == 0 {
		return false
	}
	after := false
	for _, m := range h.samples[i-1:] {
		if !m.Consumes(s, c) || !m.Serving(s) {
			return false
		}
		if m.At > t {
			after = true
			break
		}
	}
	return after
}

// available: while the model has s served to c, each of its names answers
// there (an address at least), except within a fault's window.
func (r *Result) available(h history, probes []Probe) {
	for _, p := range probes {
		s, ok := h.w.Service(p.Service)
		if !ok || !h.mustAnswer(s, p.Consumer, p.At) {
			continue
		}
		r.Checked++
		if p.Answers > 0 {
			continue
		}
		r.Misses++
		v := Violation{Invariant: "available", At: p.At, Service: p.Service, Consumer: p.Consumer,
			Detail: fmt.Sprintf("%s name: %d answers, rcode %s %s", p.Name, p.Answers, p.Rcode, p.Err), LastFault: h.lastFault(p.At)}
		if f, ok := h.excusedBy(p.At, p.Service, p.Consumer); ok {
			r.Excused[f.Kind]++
			v.LastFault = describe(f)
			if len(r.ExcusedMisses) < maxListed {
				r.ExcusedMisses = append(r.ExcusedMisses, v)
			}
			continue
		}
		r.Violations = append(r.Violations, v)
	}
}

// converged: after each fault healed, every consumer's import of every
// service matches the model within Converge (the time it took, per fault
// kind); outside faults' windows no import differs for longer than
// Converge; and the last sample matches.
func (r *Result) converged(h history) {
	durs, backs := map[string][]time.Duration{}, map[string][]time.Duration{}
	for i, f := range h.faults {
		if b, ok := h.readableAfter(f.Heal); ok {
			backs[f.Kind] = append(backs[f.Kind], b)
		}
		d, ok := h.convergedAfter(f.Heal)
		st := r.Convergence[f.Kind]
		switch {
		case h.overlapped(i, d, ok):
			st.Overlapped++
		case ok && d <= h.lim.Converge:
			durs[f.Kind] = append(durs[f.Kind], d)
		default:
			st.NotConverged++
			r.Violations = append(r.Violations, Violation{Invariant: "converged", At: f.Heal,
				Detail:    fmt.Sprintf("not converged within %s after %s healed (took %s)", h.lim.Converge, f.Kind, d.Round(time.Millisecond)),
				LastFault: h.lastFault(f.Heal)})
		}
		r.Convergence[f.Kind] = st
	}
	for kind, ds := range durs {
		st := r.Convergence[kind]
		st.N, st.P50, st.P99, st.Max = len(ds), pct(ds, 0.5), pct(ds, 0.99), pct(ds, 1)
		r.Convergence[kind] = st
	}
	for kind, bs := range backs {
		st := r.Convergence[kind]
		st.BackP50, st.BackMax = pct(bs, 0.5), pct(bs, 1)
		r.Convergence[kind] = st
	}
	for _, s := range h.w.Services {
		for _, c := range members {
			r.stuck(h, s, c)
		}
	}
}

// overlapped reports whether a fault other than the i-th one was under way
// (from its start to its heal) between the i-th's heal and d after it (the
// run's end when it never converged): the time until the fleet converged
// then includes the other fault's own, as when a member's etcd stops just
// after the hub's healed, and is not the i-th's.
func (h history) overlapped(i int, d time.Duration, ok bool) bool {
	from, to := h.faults[i].Heal, h.faults[i].Heal+d
	if !ok {
		to = time.Duration(1<<63 - 1)
	}
	for j, g := range h.faults {
		if j != i && g.Start <= to && g.Heal >= from {
			return true
		}
	}
	return false
}

// readableAfter is how long after t the harness first read every cluster.
func (h history) readableAfter(t time.Duration) (time.Duration, bool) {
	i := slices.IndexFunc(h.samples, func(m Sample) bool {
		if m.At < t {
			return false
		}
		for _, up := range m.Up {
			if !up {
				return false
			}
		}
		return true
	})
	if i < 0 {
		return 0, false
	}
	return h.samples[i].At - t, true
}

// convergedAfter is how long after t every (service, consumer) pair
// first matched the model in a sample; false when some pair never did.
func (h history) convergedAfter(t time.Duration) (time.Duration, bool) {
	var worst time.Duration
	for _, s := range h.w.Services {
		for _, c := range members {
			i := slices.IndexFunc(h.samples, func(m Sample) bool { return m.At >= t && m.Known(s, c) && m.Mismatch(s, c) == "" })
			if i < 0 {
				return 0, false
			}
			worst = max(worst, h.samples[i].At-t)
		}
	}
	return worst, true
}

// stuck reports each stretch in which c's import of s differed from the
// model for longer than Converge outside every fault's window, and a
// difference left in the last sample.
func (r *Result) stuck(h history, s Service, c string) {
	var outside time.Duration
	var prev time.Duration
	reported := false
	for i, m := range h.samples {
		bad := m.Mismatch(s, c)
		if bad == "" || !m.Known(s, c) {
			outside, reported, prev = 0, false, m.At
			continue
		}
		if _, excused := h.excusedBy(m.At, s.Name, c); i > 0 && !excused {
			outside += m.At - prev
		}
		prev = m.At
		if outside > h.lim.Converge && !reported {
			reported = true
			r.Violations = append(r.Violations, Violation{Invariant: "converged", At: m.At, Service: s.Name, Consumer: c,
				Detail:    fmt.Sprintf("differs from the model for %s outside any fault's window: %s", outside.Round(time.Millisecond), bad),
				LastFault: h.lastFault(m.At)})
		}
	}
	if n := len(h.samples); n > 0 && !reported && h.samples[n-1].Known(s, c) {
		if bad := h.samples[n-1].Mismatch(s, c); bad != "" {
			r.Violations = append(r.Violations, Violation{Invariant: "converged", At: h.samples[n-1].At, Service: s.Name, Consumer: c,
				Detail: "differs from the model at the end of the run: " + bad, LastFault: h.lastFault(h.samples[n-1].At)})
		}
	}
}

// pct is the q-quantile of ds in seconds (nearest rank).
func pct(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	i = max(0, min(i, len(s)-1))
	return s[i].Seconds()
}
