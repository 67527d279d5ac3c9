package main

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchreport"
)

// results is everything the report shows.
type results struct {
	opts options
	benchreport.Run
	goBench  []string
	objects  objectCounts
	memory   memoryResult
	shipped  shippedResources
	answers  answerComparison
	dns      []*contest
	failover []failoverResult
	// afterLoad is member's and stock's memory once the contests have run;
	// nil under -only memory.
	afterLoad memoryResult
}

func (r *results) markdown() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "# coredns-mcs benchmarks\n\n")
	fmt.Fprintf(&b, "%s; %s; load average %s at the start\n\n", r.Started.UTC().Format("2006-01-02 15:04 MST"), machine(o), r.Load)
	fmt.Fprintf(&b, "%d imported services × %d clusters × %d endpoints, %d of the services with a ClusterIP Service too, and %d Services without import, in namespace %s of %s: %d objects, %d written in %s.\n\n",
		o.services, o.clusters, o.endpoints, o.native, o.plain, o.namespace, o.context, r.objects.total, r.objects.created, r.objects.took.Round(time.Second))
	fmt.Fprintf(&b, "Command: `%s` (`make bench` passes BENCH_FLAGS).\n\n", benchreport.Command("./test/bench"))
	r.summary(&b)
	r.details(&b)
	fmt.Fprintf(&b, "\nWhole run: %s.\n", r.Elapsed.Round(time.Second))
	return b.String()
}

// summary is the table of ratios against the targets (README.md, Performance).
func (r *results) summary(b *strings.Builder) {
	fmt.Fprintf(b, "| benchmark | measured | reference | ratio | target | met |\n|---|---|---|---|---|---|\n")
	for _, c := range r.dns {
		row(b, c.name+": QPS, max load", meanQPS(c.saturated[0]), meanQPS(c.saturated[1]), qps, atLeast(c.minQPS))
		row(b, c.name+": CPU per query, max load", float64(meanCPU(c.saturated[0])), float64(meanCPU(c.saturated[1])), micros, target{})
		if c.maxP99 == 0 {
			continue
		}
		row(b, c.name+": p99, max load", float64(meanP99(c.saturated[0])), float64(meanP99(c.saturated[1])), latency, atMost(c.maxP99))
		row(b, fmt.Sprintf("%s: p99 at %d QPS (median of %d runs)", c.name, c.rate, len(c.fixed[0])), float64(medianP99(c.fixed[0])), float64(medianP99(c.fixed[1])), latency, atMost(c.maxP99))
	}
	for _, f := range r.failover {
		what := "LocalFirst failover"
		if f.fc.minReady != "" {
			what += ", below a minimum of " + f.fc.minReady + " ready local endpoints,"
		}
		fmt.Fprintf(b, "| %s through the member Corefile, after the slice update: p99 (p50) of %d | %s (%s) | | | ≤ %s | %s |\n", what, len(f.over),
			pct(f.over, 0.99).Round(time.Microsecond), pct(f.over, 0.5).Round(time.Microsecond), maxFailoverP99, benchreport.YesNo(pct(f.over, 0.99) <= maxFailoverP99))
	}
	for _, c := range memoryComparisons {
		c.row(b, r.memory)
	}
	if r.afterLoad != nil {
		afterLoad.row(b, r.afterLoad)
	}
	member := r.memory[procMember]
	for _, c := range r.shipped.checks(member) {
		rel := "≥"
		if !c.atLeast {
			rel = "≤"
		}
		fmt.Fprintf(b, "| shipped CoreDNS (%s), %s | %s | | | %s %s | %s |\n", memberKustomization, c.what, mib(c.have), rel, mib(c.want), benchreport.YesNo(c.met()))
	}
	a := r.answers
	fmt.Fprintf(b, "| answers, member Corefile with vs without its labels line: questions answered differently | %d of %d | | | 0 | %s |\n",
		len(a.differ), a.queries, benchreport.YesNo(len(a.differ) == 0))
}

// target is a bound on a ratio; none (0) for a figure shown to explain the
// others.
type target struct {
	bound float64
	min   bool // the ratio must be at least bound; else at most
}

func atLeast(v float64) target { return target{bound: v, min: true} }
func atMost(v float64) target  { return target{bound: v} }

func row(b *strings.Builder, name string, measured, reference float64, format func(float64) string, t target) {
	ratio := measured / reference
	want, met := fmt.Sprintf("≤ %.2f", t.bound), benchreport.YesNo(ratio <= t.bound)
	switch {
	case t.bound == 0:
		want, met = "", ""
	case t.min:
		want, met = fmt.Sprintf("≥ %.2f", t.bound), benchreport.YesNo(ratio >= t.bound)
	}
	fmt.Fprintf(b, "| %s | %s | %s | %.2f | %s | %s |\n", name, format(measured), format(reference), ratio, want, met)
}

func (c memoryComparison) row(b *strings.Builder, res memoryResult) {
	row(b, c.what, float64(c.figure(res[c.measured])), float64(c.figure(res[c.reference])), func(v float64) string { return mib(int64(v)) }, atMost(c.max))
}

func micros(v float64) string { return fmt.Sprintf("%.1f µs", v/float64(time.Microsecond)) }

func qps(v float64) string { return fmt.Sprintf("%.0f", v) }

func latency(v float64) string {
	return fmt.Sprintf("%.3f ms", v/float64(time.Millisecond))
}

// details are every run, the response codes, the memory readings and the Go
// benchmarks, so that the summary can be checked.
func (r *results) details(b *strings.Builder) {
	if len(r.dns) > 0 { // none with -only memory
		r.dnsperfDetails(b)
	}
	r.memoryDetails(b)
	if len(r.goBench) > 0 {
		fmt.Fprintf(b, "\n## Go benchmarks (go test -run '^$' -bench . -benchmem ./plugin/mcs/)\n\n```\n%s\n```\n", strings.Join(r.goBench, "\n"))
	}
}

func (r *results) dnsperfDetails(b *strings.Builder) {
	o := r.opts
	fmt.Fprintf(b, "\n## dnsperf runs\n\n")
	fmt.Fprintf(b, "UDP, -c %d -q %d; at max load %d runs of %s per side, at a fixed rate %d runs of %s per side, in alternating order (ABBA…); ratios of the means, but for the fixed-rate p99: the median of the runs' p99s. ",
		o.clients, o.outstanding, o.rounds, o.duration, o.fixedRuns, o.fixedLength)
	fmt.Fprintf(b, "Every name was checked first to answer NOERROR with exactly the expected A record on each side (whoami: NOERROR).\n\n")
	fmt.Fprintf(b, "| benchmark | side | load | QPS | p50 | p99 | CPU per query | sent | lost | response codes |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range r.dns {
		for i, s := range c.sides {
			for _, run := range c.saturated[i] {
				runRow(b, c.name, s.name, "max", run)
			}
			for _, run := range c.fixed[i] {
				runRow(b, c.name, s.name, fmt.Sprintf("%d QPS", c.rate), run)
			}
		}
	}
	fmt.Fprintf(b, "\nFixed-rate p99 by statistic, measured vs reference: the median of the runs' p99s (the table's), the mean of the runs' p99s, and the p99 of all queries of a side's runs pooled.\n\n")
	fmt.Fprintf(b, "| benchmark | median | mean | pooled |\n|---|---|---|---|\n")
	for _, c := range r.dns {
		if len(c.fixed[0]) == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s at %d QPS | %s |\n", c.name, c.rate, strings.Join([]string{
			p99Pair(medianP99, c.fixed), p99Pair(meanP99, c.fixed), p99Pair(pooledP99, c.fixed)}, " | "))
	}
}

func (r *results) memoryDetails(b *strings.Builder) {
	fmt.Fprintf(b, "\n## Memory\n\n")
	fmt.Fprintf(b, "VmRSS: the largest of %d samples one second apart, taken %s after the process was ready (informers synced), before any query. Processes started together, a group at a time: %s.\n\n",
		rssSamples, r.opts.settle, groupsText())
	fmt.Fprintf(b, "| process | ready after | RSS | peak RSS (VmHWM) |\n|---|---|---|---|\n")
	for _, g := range memoryGroups(memberCorefileSet{}) {
		for _, p := range g {
			m := r.memory[p.name]
			fmt.Fprintf(b, "| %s | %s | %s | %s |\n", p.name, m.ready.Round(10*time.Millisecond), mib(m.rss), mib(m.hwm))
		}
	}
	if r.afterLoad != nil {
		fmt.Fprintf(b, "\nAfter the query contests and the failovers, sampled the same way:\n\n| process | RSS | peak RSS (VmHWM) |\n|---|---|---|\n")
		for _, name := range []string{procMember, procStock} {
			m := r.afterLoad[name]
			fmt.Fprintf(b, "| %s | %s | %s |\n", name, mib(m.rss), mib(m.hwm))
		}
	}
	s := r.shipped
	fmt.Fprintf(b, "\nShipped in %s (kustomize build): memory request %s, limit %s, GOMEMLIMIT %s. ", memberKustomization, mib(s.request), mib(s.limit), mib(s.goMemLimit))
	fmt.Fprintf(b, "The rule, from the member Corefile's process: request ≥ its RSS, limit ≥ %.0f × its peak, GOMEMLIMIT %.0f–%.0f%% of the limit.\n",
		limitPerPeak, 100*minGoMemLimitShare, 100*maxGoMemLimitShare)
	r.answerDetails(b)
}

// groupsText names the memory comparison's processes by group.
func groupsText() string {
	var gs []string
	for _, g := range memoryGroups(memberCorefileSet{}) {
		var names []string
		for _, p := range g {
			names = append(names, p.name)
		}
		gs = append(gs, strings.Join(names, ", "))
	}
	return strings.Join(gs, "; then ")
}

// answerDetails lists the kinds of questions the labels line changes.
func (r *results) answerDetails(b *strings.Builder) {
	a := r.answers
	fmt.Fprintf(b, "\n## Answers with the labels line\n\n")
	fmt.Fprintf(b, "The member Corefile, whose kubernetes plugin has `labels %s`, against the same without that line: %d questions about every object of the namespace but the fixture's svc-<i>, of which %d (every %s), each asked of both over UDP (TCP when truncated); responses compared packed, the ID, SOA serials and the order within a section set aside. %d differ (every one in %s/answers.diff):\n\n",
		importedSlicesSelector, a.queries, a.services, ordinal(max(1, r.opts.services/r.opts.compare)), len(a.differ), r.opts.outDir)
	if len(a.differ) == 0 {
		return
	}
	fmt.Fprintf(b, "| question (numbers as N) | differ | first | without the labels line | with it |\n|---|---|---|---|---|\n")
	for _, k := range diffKinds(a.differ) {
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", k.kind, k.n, k.first.q, k.first.without, k.first.with)
	}
}

func ordinal(n int) string {
	if n == 1 {
		return "one"
	}
	return strconv.Itoa(n) + "th"
}

// p99Pair shows one p99 statistic of both sides and their ratio.
func p99Pair(stat func([]perfRun) time.Duration, runs [2][]perfRun) string {
	m, r := stat(runs[0]), stat(runs[1])
	return fmt.Sprintf("%s vs %s (%.2f)", latency(float64(m)), latency(float64(r)), float64(m)/float64(r))
}

func runRow(b *strings.Builder, zone, side, load string, r perfRun) {
	var codes []string
	for _, k := range slices.Sorted(maps.Keys(r.rcodes)) {
		codes = append(codes, fmt.Sprintf("%s %d", k, r.rcodes[k]))
	}
	fmt.Fprintf(b, "| %s | %s | %s | %.0f | %s | %s | %s | %d | %d | %s |\n", zone, side, load, r.qps,
		latency(float64(r.p50)), latency(float64(r.p99)), micros(float64(r.cpu)), r.sent, r.lost, strings.Join(codes, ", "))
}

// machine describes where the run happened.
func machine(o options) string {
	cpu := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	mem := ""
	if total, err := memTotal(); err == nil {
		mem = fmt.Sprintf(", %.0f GiB", float64(total)/(1<<30))
	}
	return fmt.Sprintf("%s × %d%s; %s; %s; dnsperf %s", cpu, runtime.NumCPU(), mem, runtime.Version(), version(o.coredns, "-version"), version("dnsperf", "-h"))
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	var kb int64
	for _, l := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(l, "MemTotal: %d kB", &kb); err == nil {
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}

// version is the version a program prints: CoreDNS's first line, or
// dnsperf's "Version X" line.
func version(prog, flag string) string {
	out, _ := exec.Command(prog, flag).CombinedOutput()
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "Version "); ok {
			return v
		}
		if strings.HasPrefix(l, "CoreDNS-") {
			return l
		}
	}
	return "unknown version"
}
