package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// dnsperfTimeout is dnsperf's default query timeout: a lost query counts
// as this latency in the percentiles, so that dropping does not pay.
const dnsperfTimeout = 5 * time.Second

// perfRun is one dnsperf run against one side.
type perfRun struct {
	qps      float64
	p50, p99 time.Duration
	sent     int
	lost     int
	rcodes   map[string]int
	// cpu is the CPU time the server spent per answered query: unlike QPS,
	// it hardly moves with what else runs on the machine.
	cpu time.Duration
	// latencies of every query, sorted (a lost one as dnsperfTimeout): kept
	// for fixed-rate runs only, whose p99 is also taken over all runs of a
	// side pooled.
	latencies []time.Duration
}

var (
	reQPS  = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	reSent = regexp.MustCompile(`Queries sent:\s+([0-9]+)`)
	reLost = regexp.MustCompile(`Queries lost:\s+([0-9]+)`)
)

// writeQueryFile writes one query per name of qs, in order.
func writeQueryFile(o options, qs querySet) (string, error) {
	path := filepath.Join(o.outDir, qs.file)
	var b strings.Builder
	for i := range qs.count(o) {
		fmt.Fprintf(&b, "%s %s\n", strings.TrimSuffix(qs.name(o, i), "."), dns.TypeToString[qs.qtype])
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// dnsperf runs one load of length d against s: as fast as it answers with
// -outstanding queries in flight when rate is 0, else at rate queries per
// second. -v prints every query's latency, from which the percentiles come.
func dnsperf(ctx context.Context, o options, s *server, queries string, rate int, d time.Duration) (perfRun, error) {
	args := []string{
		"-s", "127.0.0.1", "-p", strconv.Itoa(s.port), "-d", queries,
		"-l", strconv.FormatFloat(d.Seconds(), 'f', -1, 64),
		"-c", strconv.Itoa(o.clients), "-q", strconv.Itoa(o.outstanding), "-v",
	}
	if rate > 0 {
		args = append(args, "-Q", strconv.Itoa(rate))
	}
	ctx, cancel := context.WithTimeout(ctx, d+2*dnsperfTimeout+10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dnsperf", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return perfRun{}, err
	}
	cpu0, cerr := cpuTime(s.Pid())
	if err := cmd.Start(); err != nil {
		return perfRun{}, fmt.Errorf("starting dnsperf: %w", err)
	}
	run, latencies, perr := parseDnsperf(out)
	_, _ = io.Copy(io.Discard, out) // after a parse error, so that dnsperf can finish
	if err := cmd.Wait(); err != nil {
		return perfRun{}, fmt.Errorf("dnsperf %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	if perr != nil {
		return perfRun{}, perr
	}
	cpu1, cerr1 := cpuTime(s.Pid())
	if err := errors.Join(cerr, cerr1); err != nil {
		return perfRun{}, err
	}
	if answered := len(latencies); answered > 0 {
		run.cpu = (cpu1 - cpu0) / time.Duration(answered)
	}
	for range run.lost {
		latencies = append(latencies, dnsperfTimeout)
	}
	if len(latencies) == 0 {
		return perfRun{}, fmt.Errorf("dnsperf against %s reported no query", s.Name())
	}
	slices.Sort(latencies)
	run.p50, run.p99 = percentile(latencies, 0.50), percentile(latencies, 0.99)
	if rate > 0 {
		run.latencies = latencies
	}
	return run, nil
}

// parseDnsperf reads dnsperf -v output: a line "> RCODE NAME TYPE SECONDS"
// per answered query, then the statistics.
func parseDnsperf(r io.Reader) (perfRun, []time.Duration, error) {
	run := perfRun{rcodes: map[string]int{}}
	var latencies []time.Duration
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 5 && f[0] == ">" {
			sec, err := strconv.ParseFloat(f[4], 64)
			if err != nil {
				return run, nil, fmt.Errorf("dnsperf line %q: %w", line, err)
			}
			run.rcodes[f[1]]++
			latencies = append(latencies, time.Duration(sec*float64(time.Second)))
			continue
		}
		if m := reQPS.FindStringSubmatch(line); m != nil {
			run.qps, _ = strconv.ParseFloat(m[1], 64)
		} else if m := reSent.FindStringSubmatch(line); m != nil {
			run.sent, _ = strconv.Atoi(m[1])
		} else if m := reLost.FindStringSubmatch(line); m != nil {
			run.lost, _ = strconv.Atoi(m[1])
		}
	}
	if err := sc.Err(); err != nil {
		return run, nil, err
	}
	if run.qps == 0 {
		return run, nil, errors.New("dnsperf printed no statistics")
	}
	return run, latencies, nil
}

// cpuTime is the user and system CPU time process pid has used, from
// /proc/PID/stat (fields 14 and 15, in clock ticks of 1/100 s on Linux).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, may hold spaces: count from its ")".
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// percentile of sorted values, nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, i)]
}

// contest compares two sides in alternating runs, two processes on one
// query set or two query sets on one process: the ratio sides[0] /
// sides[1] is held against its targets.
type contest struct {
	name   string // as in the table
	sides  [2]side
	minQPS float64 // target: QPS ratio at least
	maxP99 float64 // target: p99 ratio at most; 0 for none, and no fixed-rate runs

	saturated [2][]perfRun
	fixed     [2][]perfRun
	rate      int // offered QPS of the fixed-rate runs
}

// run does -rounds saturating runs per side, the order alternating between
// rounds, then, when c has a p99 target, -fixed-runs short runs per side at
// -load times the slower side's mean QPS, in the same order (ABBA…). The
// fixed-rate p99 of a side is the median of its runs' p99s (test/bench/README.md,
// "What it does").
func (c *contest) run(ctx context.Context, o options) error {
	var queries [2]string
	for i, s := range c.sides {
		var err error
		if queries[i], err = writeQueryFile(o, s.queries); err != nil {
			return err
		}
	}
	if err := c.rounds(ctx, o, queries, 0, o.rounds, o.duration, &c.saturated); err != nil {
		return err
	}
	if c.maxP99 == 0 {
		return nil
	}
	c.rate = int(o.load * min(meanQPS(c.saturated[0]), meanQPS(c.saturated[1])))
	return c.rounds(ctx, o, queries, c.rate, o.fixedRuns, o.fixedLength, &c.fixed)
}

// rounds does n runs of length d per side, measured side first in even
// rounds and second in odd ones, so that a drift in the machine's load
// weighs on both sides alike.
func (c *contest) rounds(ctx context.Context, o options, queries [2]string, rate, n int, d time.Duration, into *[2][]perfRun) error {
	for r := range n {
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			run, err := dnsperf(ctx, o, c.sides[i].srv, queries[i], rate, d)
			if err != nil {
				return err
			}
			log.Printf("%s, %s, rate %s: %.0f QPS, p50 %s, p99 %s, lost %d, %v", c.name, c.sides[i].name, rateName(rate),
				run.qps, run.p50, run.p99, run.lost, run.rcodes)
			into[i] = append(into[i], run)
		}
	}
	return nil
}

func rateName(rate int) string {
	if rate == 0 {
		return "max"
	}
	return strconv.Itoa(rate)
}

func meanQPS(runs []perfRun) float64 {
	return mean(runs, func(r perfRun) float64 { return r.qps })
}

func meanCPU(runs []perfRun) time.Duration {
	return time.Duration(mean(runs, func(r perfRun) float64 { return float64(r.cpu) }))
}

func meanP99(runs []perfRun) time.Duration {
	return time.Duration(mean(runs, func(r perfRun) float64 { return float64(r.p99) }))
}

// medianP99 is the median of the runs' p99s: the p99 of a typical short
// run. A neighbour's burst on the machine spoils the few runs it falls in,
// on either side, and moves the median by at most one run.
func medianP99(runs []perfRun) time.Duration {
	p := make([]time.Duration, 0, len(runs))
	for _, r := range runs {
		p = append(p, r.p99)
	}
	slices.Sort(p)
	if n := len(p); n%2 == 0 {
		return (p[n/2-1] + p[n/2]) / 2
	}
	return p[len(p)/2]
}

// pooledP99 is the p99 of every query of the runs together.
func pooledP99(runs []perfRun) time.Duration {
	var all []time.Duration
	for _, r := range runs {
		all = append(all, r.latencies...)
	}
	if len(all) == 0 {
		return 0
	}
	slices.Sort(all)
	return percentile(all, 0.99)
}

func mean(runs []perfRun, f func(perfRun) float64) float64 {
	sum := 0.0
	for _, r := range runs {
		sum += f(r)
	}
	return sum / float64(len(runs))
}
