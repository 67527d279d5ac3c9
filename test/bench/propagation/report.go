package main

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchreport"
)

// Targets (README.md, Performance).
const (
	targetP50 = 100 * time.Millisecond
	targetP99 = 500 * time.Millisecond
)

// results is everything the report shows.
type results struct {
	opts options
	benchreport.Run
	objects objectCounts

	initial, join, single, burst, restart *phase
	consumers                             []string // the consumption clusters at the end
	initialConsumers                      []string // … and at the initial sync
	// The controller's resident memory after the initial sync and after
	// the burst, per replica.
	rssInitial, rssBurst []int64
	heapInitial          []int64        // each replica's Go heap in use, when rssInitial was read
	rssDNS               int64          // coredns-mcs's, after the initial sync
	initialAPI           []apiPhase     // the API servers during the initial sync
	initialCPU           []programCPU   // the machine's CPU during the initial sync, by program
	ceiling              []ceilingLevel // the consumer's API server under plain write loads
	order                *orderCost     // what a failover order costs the consumer
	controllerErrors     []string       // error lines of the controller's log
}

func (r *results) markdown() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "# Propagation: mcs-controller and coredns-mcs on the lab\n\n")
	fmt.Fprintf(&b, "%s; %d CPUs, %s; load average %s at the start (a machine shared with other work).\n\n",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), runtime.NumCPU(), runtime.Version(), r.Load)
	fmt.Fprintf(&b, "%d services in namespace %s: a selector-less %sService and an EndpointSlice of %d ready endpoints each in %s, a MultiClusterService each on the hub (provision %s, consumption %s, RemoteAndLocal); %d objects, %d written in %s. ",
		o.services, o.namespace, headlessText(o.headless), o.endpoints, providerCluster, providerCluster, strings.Join(o.consumers, ", "), r.objects.total, r.objects.written, r.objects.took.Round(time.Second))
	fmt.Fprintf(&b, "bin/mcs-controller (%s, flags: defaults%s) and bin/coredns-mcs for %s (`answer endpoints`, no cache).\n\n", replicasText(o.shards), extraFlags(o.controllerArgs), consumerCluster)
	fmt.Fprintf(&b, "Command: `%s` (`make bench` passes PROP_FLAGS, and SCALE_FLAGS for the scale run).\n\n", benchreport.Command("./test/bench/propagation"))
	r.latencyTable(&b)
	r.scaleTable(&b)
	r.writesTable(&b)
	r.orderTable(&b)
	r.timingsTable(&b)
	r.apiTable(&b)
	if n := len(r.controllerErrors); n > 0 {
		fmt.Fprintf(&b, "\nThe controller logged %d error lines; the first:\n\n```\n%s\n```\n", n, strings.Join(r.controllerErrors[:min(n, 5)], "\n"))
	}
	fmt.Fprintf(&b, "\nWhole run: %s.\n", r.Elapsed.Round(time.Second))
	return b.String()
}

func headlessText(headless bool) string {
	if headless {
		return "headless "
	}
	return ""
}

func replicasText(shards int) string {
	if shards == 1 {
		return "one replica"
	}
	return fmt.Sprintf("%d replicas started together, each campaigning for `--shards %d`'s Leases", shards, shards)
}

func extraFlags(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return " but `" + strings.Join(args, " ") + "`"
}

func (r *results) latencyTable(b *strings.Builder) {
	target := fmt.Sprintf("p50 ≤ %d ms, p99 ≤ %d ms", targetP50.Milliseconds(), targetP99.Milliseconds())
	fmt.Fprintf(b, "## Latency\n\nFrom the source update's acknowledgement by %s's API server.\n\n", providerCluster)
	fmt.Fprintf(b, "| measure | n | p50 | p99 | max | target | met |\n|---|---|---|---|---|---|---|\n")
	// The targets are for one change; a burst of every service at once has
	// none.
	rows := []struct {
		what     string
		ds       []time.Duration
		targeted bool
	}{
		{"one change at a time → imported slice seen " + inEach(r.consumers) + " (watch)", r.single.seen, true},
		{"one change at a time → " + consumerCluster + "'s coredns-mcs answers the new address", r.single.answered, true},
		{fmt.Sprintf("burst of %d → imported slice seen, per service", r.burst.changes), r.burst.seen, false},
		{fmt.Sprintf("burst of %d → new answer, per service", r.burst.changes), r.burst.answered, false},
	}
	for _, row := range rows {
		l := summarize(row.ds)
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |", row.what, l.n, ms(l.p50), ms(l.p99), ms(l.max))
		if row.targeted {
			fmt.Fprintf(b, " %s | %s |\n", target, benchreport.YesNo(l.p50 <= targetP50 && l.p99 <= targetP99))
		} else {
			b.WriteString(" | |\n")
		}
	}
	fmt.Fprintf(b, "| burst of %d: first update sent → last one acknowledged (the benchmark's own writes) | | | | %s | | |\n", r.burst.changes, ms(r.burst.acked))
	fmt.Fprintf(b, "| burst of %d: first update sent → every answer new | | | | %s | | |\n", r.burst.changes, ms(r.burst.took))
	fmt.Fprintf(b, "| initial sync of %d services: controller started → every answer there | | | | %s | | |\n", r.initial.changes, ms(r.initial.took))
	if r.join != nil {
		fmt.Fprintf(b, "| %s joins (member Secret created) → every service imported there (watch) | | | | %s | | |\n", r.opts.join, ms(r.join.took))
	}
}

// Fleet-scale targets (README.md, Performance), each for its fixture: the
// propagation part's 1,000 ClusterSetIP services into member2, and the
// scale part's 10,000 headless ones into member1 and member2, member3
// joining.
const (
	targetSync1k  = 10 * time.Second
	targetSync10k = 3 * time.Minute
	targetJoin10k = 2 * time.Minute
	targetRSS10k  = 150 << 20
)

// scaleTable puts the initial sync, the join, the writes per service and
// the controller's memory beside their targets, where the run's fixture
// has one.
func (r *results) scaleTable(b *strings.Builder) {
	o := r.opts
	fmt.Fprintf(b, "\n## Fleet scale\n\n| measure | measured | target | met |\n|---|---|---|---|\n")
	syncTarget := time.Duration(0)
	switch {
	case o.services == 1000 && !o.headless && len(r.initialConsumers) == 1:
		syncTarget = targetSync1k
	case o.services == 10000 && o.headless && len(r.initialConsumers) == 2:
		syncTarget = targetSync10k
	}
	durationRow(b, fmt.Sprintf("initial sync, %d %sservices into %s: controller started → every answer there", o.services, headlessText(o.headless), strings.Join(r.initialConsumers, " and ")), r.initial.took, syncTarget)
	if r.join != nil {
		joinTarget := time.Duration(0)
		if o.services == 10000 {
			joinTarget = targetJoin10k
		}
		durationRow(b, fmt.Sprintf("%s joins a %d-service fleet → every service imported there", o.join, o.services), r.join.took, joinTarget)
	}
	measured, floor, atFloor := r.writesPerService()
	fmt.Fprintf(b, "| API writes per service at the initial sync | %s | the floor: %s | %s |\n", measured, floor, benchreport.YesNo(atFloor))
	most := slices.Max(r.rssInitial)
	if o.services == 10000 && len(r.consumers) == 3 {
		fmt.Fprintf(b, "| mcs-controller VmRSS, %d services × 3 members (the most of its replicas) | %.1f MiB | ≤ %d MiB | %s |\n", o.services, mib(most), targetRSS10k>>20, benchreport.YesNo(most <= targetRSS10k))
	} else {
		fmt.Fprintf(b, "| mcs-controller VmRSS (the most of its replicas) | %.1f MiB | — (%d MiB at 10,000 × 3 members) | |\n", mib(most), targetRSS10k>>20)
	}
}

// durationRow is a row of the scale table; a zero target is none for this
// fixture.
func durationRow(b *strings.Builder, what string, took, target time.Duration) {
	if target == 0 {
		fmt.Fprintf(b, "| %s | %s | — (not this fixture's) | |\n", what, took.Round(100*time.Millisecond))
		return
	}
	fmt.Fprintf(b, "| %s | %s | ≤ %s | %s |\n", what, took.Round(100*time.Millisecond), target, benchreport.YesNo(took <= target))
}

// writesPerService is what the initial sync wrote per service, on the hub
// and in each consumer (Leases aside), beside the floor docs/scaling.md
// states: the hub's finalizer and conditions; a consumer's ServiceImport,
// its status, derived-<svc> and the imported slice, and for a ClusterSetIP
// import the ServiceImport once more for its spec.ips.
func (r *results) writesPerService() (measured, floor string, atFloor bool) {
	perConsumer := 5
	if r.opts.headless {
		perConsumer = 4
	}
	want := map[string]int{hubCluster: 2}
	for _, c := range r.initialConsumers {
		want[c] = perConsumer
	}
	got := map[string]float64{}
	for _, w := range r.initial.writes {
		if !isLease(w) {
			got[w.cluster] += w.n
		}
	}
	atFloor = true
	var parts []string
	for _, c := range slices.Sorted(maps.Keys(want)) {
		n := got[c] / float64(r.opts.services)
		parts = append(parts, fmt.Sprintf("%s %.2f", c, n))
		atFloor = atFloor && n == float64(want[c])
	}
	return strings.Join(parts, ", "), fmt.Sprintf("hub 2, each consumer %d", perConsumer), atFloor && len(got) == len(want)
}

func (r *results) phases() []*phase {
	if r.join == nil {
		return []*phase{r.initial, r.single, r.burst, r.restart}
	}
	return []*phase{r.initial, r.join, r.single, r.burst, r.restart}
}

func (r *results) writesTable(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Writes (mcs_writes_total)\n\nTarget: one EndpointSlice update %s per source change, nothing else. Lease renewals run on a clock (every 5 s), whatever changes.\n\n", inEach(r.consumers))
	fmt.Fprintf(b, "| phase | cluster | kind | verb | result | writes | per change (initial sync: per service) |\n|---|---|---|---|---|---|---|\n")
	for _, p := range r.phases() {
		for _, w := range p.writes {
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %.0f | %.2f |\n", p.name, w.cluster, w.kind, w.verb, w.result, w.n, w.n/float64(p.changes))
		}
	}
	b.WriteString("\n")
	for _, p := range []*phase{r.single, r.burst} {
		fmt.Fprintf(b, "- %s: %s %.2f syncs per change.\n", p.name, writesVerdict(p, r.consumers), p.syncs()/float64(p.changes))
	}
	fmt.Fprintf(b, "- restart over the unchanged world: %s Every service synced %s after the restart.\n", restartVerdict(r.restart), r.restart.took.Round(time.Millisecond))
	for _, p := range r.phases() {
		fmt.Fprintf(b, "- the controller's CPU (process_cpu_seconds_total) during %s: %.1f s, %.2f ms per %s.\n", p.name, p.cpu, 1000*p.cpu/float64(p.changes), p.unit())
	}
	fmt.Fprintf(b, "- resident memory (VmRSS): %s %s after the initial sync (Go heap in use %s), %s after the burst; %s's coredns-mcs %.1f MiB after the initial sync.\n", r.controllerNoun(), mibs(r.rssInitial), mibs(r.heapInitial), mibs(r.rssBurst), consumerCluster, mib(r.rssDNS))
}

// controllerNoun names what the memory figures are of: the controller, or
// each of its replicas.
func (r *results) controllerNoun() string {
	if r.opts.shards == 1 {
		return "the controller"
	}
	return fmt.Sprintf("the controller's %d replicas (`--shards %d`), each", r.opts.shards, r.opts.shards)
}

// mibs is one figure per replica, in replica order.
func mibs(v []int64) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = fmt.Sprintf("%.1f", mib(n))
	}
	return strings.Join(parts, " / ") + " MiB"
}

// restartVerdict says whether a restart wrote nothing but Leases.
func restartVerdict(p *phase) string {
	var other []string
	for _, w := range p.writes {
		if !isLease(w) {
			other = append(other, fmt.Sprintf("%.0f %s %s %s (%s)", w.n, w.cluster, w.kind, w.verb, w.result))
		}
	}
	if len(other) > 0 {
		return "wrote " + strings.Join(other, ", ") + ". Target (no write) not met."
	}
	return "no write but Leases. Target met."
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// syncs counts the controller's syncs during the phase.
func (p *phase) syncs() float64 {
	var n uint64
	for _, t := range p.timings {
		if strings.HasPrefix(t.series, "mcs_sync_svc_duration_seconds") {
			n += t.count
		}
	}
	return float64(n)
}

// writesVerdict says whether a phase met the writes target: one
// EndpointSlice update in each consumer per change.
func writesVerdict(p *phase, consumers []string) string {
	var other, off []string
	var updates float64
	perCluster := map[string]float64{}
	for _, w := range p.writes {
		switch {
		case isLease(w):
		case w.writeKey == writeKey{w.cluster, "EndpointSlice", "update", "success"} && slices.Contains(consumers, w.cluster):
			perCluster[w.cluster] = w.n
			updates += w.n
		default:
			other = append(other, fmt.Sprintf("%.0f %s %s %s (%s)", w.n, w.cluster, w.kind, w.verb, w.result))
		}
	}
	for _, c := range consumers {
		if perCluster[c] != float64(p.changes) {
			off = append(off, fmt.Sprintf("%.0f in %s", perCluster[c], c))
		}
	}
	per := updates / float64(p.changes*len(consumers))
	switch {
	case len(other) > 0:
		return fmt.Sprintf("%.2f EndpointSlice updates per change and consumer, and more: %s. Target not met.", per, strings.Join(other, ", "))
	case len(off) > 0:
		return fmt.Sprintf("EndpointSlice updates for %d changes: %s (%.2f per change and consumer). Target not met.", p.changes, strings.Join(off, ", "), per)
	}
	return fmt.Sprintf("exactly one EndpointSlice update %s per change (%d), nothing else. Target met.", inEach(consumers), p.changes)
}

// inEach is "in member2", or "in each of member2 and member3".
func inEach(clusters []string) string {
	if len(clusters) == 1 {
		return "in " + clusters[0]
	}
	return "in each of " + strings.Join(clusters, " and ")
}

func (r *results) timingsTable(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Where the time goes (the controller's histograms)\n\n")
	fmt.Fprintf(b, "Observations during each phase; p50 and p99 interpolated within the buckets as histogram_quantile does. The mcs_* buckets double from 1 ms to 16 s; the workqueue_* ones grow tenfold up to 10 s, so their quantiles are coarse. mcs_propagation_seconds runs from the controller seeing the source change to a consumer's API server acknowledging the imported copy.\n\n")
	fmt.Fprintf(b, "| phase | series | count | mean | p50 | p99 |\n|---|---|---|---|---|---|\n")
	for _, p := range r.phases() {
		for _, t := range p.timings {
			fmt.Fprintf(b, "| %s | `%s` | %d | %s | %s | %s |\n", p.name, t.series, t.count, seconds(t.mean()), quantileText(t.histogram, 0.5), quantileText(t.histogram, 0.99))
		}
	}
}

// quantileText is h's q-quantile, or how far it is known when it lies past
// the highest bucket.
func quantileText(h histogram, q float64) string {
	v := h.quantile(q)
	if math.IsInf(v, 1) {
		return "> " + seconds(h.top())
	}
	return seconds(v)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

func seconds(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return ms(time.Duration(v * float64(time.Second)))
}

// apiTable shows the API servers' own figures: during the initial sync,
// and under the plain write loads of the ceiling.
func (r *results) apiTable(b *strings.Builder) {
	fmt.Fprintf(b, "\n## The API servers (their own /metrics)\n\n")
	fmt.Fprintf(b, "Writes each answered (`%s`; mean, and p99 within its buckets) and the most mutating requests it had in flight (`%s`, sampled every %s during the initial sync, every %s under the ceiling's loads).\n\n", requestMetric, inflightMetric, syncSampleEvery, ceilingSampleEvery)
	fmt.Fprintf(b, "| phase | cluster | request | count | mean | p99 |\n|---|---|---|---|---|---|\n")
	rows := func(phase string, api []apiPhase) {
		for _, a := range api {
			for _, t := range a.requests {
				fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s |\n", phase, a.cluster, t.series, t.count, seconds(t.mean()), quantileText(t.histogram, 0.99))
			}
		}
	}
	rows("initial sync", r.initialAPI)
	for _, l := range r.ceiling {
		rows(fmt.Sprintf("ceiling, %d at once", l.inFlight), l.api)
	}
	b.WriteString("\n")
	for _, a := range r.initialAPI {
		fmt.Fprintf(b, "- initial sync, %s: %d writes, %.0f per second over the %s; at most %.0f mutating requests in flight; the API server used %.1f s of CPU, %.1f ms per write.\n",
			a.cluster, a.writes(), float64(a.writes())/r.initial.took.Seconds(), r.initial.took.Round(time.Millisecond), a.maxInflight, a.cpu, 1000*a.cpu/float64(a.writes()))
	}
	r.cpuSummary(b)
	r.ceilingSummary(b)
}

// cpuSummary says where the machine's CPU went during the initial sync.
func (r *results) cpuSummary(b *strings.Builder) {
	if len(r.initialCPU) == 0 {
		return
	}
	var parts []string
	total := 0.0
	for i, p := range r.initialCPU {
		total += p.seconds
		if i < 8 {
			parts = append(parts, fmt.Sprintf("%s %.1f s", p.program, p.seconds))
		}
	}
	took := r.initial.took.Seconds()
	fmt.Fprintf(b, "- CPU during the initial sync (from the controller's start until it was quiet), by program: %s; %.1f s in all, of %.1f s that %d cores had over the %.1f s of the sync.\n",
		strings.Join(parts, ", "), total, took*float64(runtime.NumCPU()), runtime.NumCPU(), took)
}

// ceilingSummary shows each plain write load, and the initial sync into
// member2 as a fraction of the best.
func (r *results) ceilingSummary(b *strings.Builder) {
	if len(r.ceiling) == 0 {
		return
	}
	var best ceilingLevel
	for _, l := range r.ceiling {
		fmt.Fprintf(b, "- ceiling, %d services at once: %d writes (derived Service, ServiceImport, its status, slice per service) in %s, %.0f per second; at most %.0f mutating requests in flight; %s.\n",
			l.inFlight, l.writes, l.took.Round(time.Millisecond), l.perSecond(), maxInflight(l.api), apiCPU(l.api, l.writes))
		if l.perSecond() > best.perSecond() || best.took == 0 {
			best = l
		}
	}
	for _, a := range r.initialAPI {
		if a.cluster == consumerCluster {
			rate := float64(a.writes()) / r.initial.took.Seconds()
			fmt.Fprintf(b, "- the initial sync wrote into %s at %.0f per second: %.2f of its ceiling (%.0f per second, %d at once).\n", consumerCluster, rate, rate/best.perSecond(), best.perSecond(), best.inFlight)
		}
	}
}

// apiCPU is the CPU the API servers used for writes.
func apiCPU(api []apiPhase, writes int) string {
	var cpu float64
	for _, a := range api {
		cpu += a.cpu
	}
	return fmt.Sprintf("the API server used %.1f s of CPU, %.1f ms per write", cpu, 1000*cpu/float64(writes))
}

func maxInflight(api []apiPhase) float64 {
	var m float64
	for _, a := range api {
		m = max(m, a.maxInflight)
	}
	return m
}
