package main

import (
	"strings"
	"testing"
	"time"
)

// dnsperf 2.10.0 -v output, shortened.
const dnsperfOutput = `DNS Performance Testing Tool
Version 2.10.0

[Status] Command line: dnsperf -s 127.0.0.1 -p 15353 -d q.txt -l 2 -v
[Status] Sending queries (to 127.0.0.1:15353)
> NOERROR a1.example.org A 0.000685
> NOERROR a2.example.org A 0.000222
> SERVFAIL a3.example.org A 0.000171
> NOERROR a4.example.org A 0.000124

Statistics:

  Queries sent:         5
  Queries completed:    4 (80.00%)
  Queries lost:         1 (20.00%)

  Response codes:       NOERROR 3 (75.00%), SERVFAIL 1 (25.00%)
  Average packet size:  request 32, response 63
  Run time (s):         2.001425
  Queries per second:   2.498221

  Average Latency (s):  0.000300 (min 0.000124, max 0.000685)
  Latency StdDev (s):   0.000200
`

func TestParseDnsperf(t *testing.T) {
	run, latencies, err := parseDnsperf(strings.NewReader(dnsperfOutput))
	if err != nil {
		t.Fatal(err)
	}
	if run.qps != 2.498221 || run.sent != 5 || run.lost != 1 {
		t.Errorf("qps %v, sent %d, lost %d; want 2.498221, 5, 1", run.qps, run.sent, run.lost)
	}
	if run.rcodes["NOERROR"] != 3 || run.rcodes["SERVFAIL"] != 1 || len(run.rcodes) != 2 {
		t.Errorf("rcodes %v, want NOERROR 3, SERVFAIL 1", run.rcodes)
	}
	want := []time.Duration{685 * time.Microsecond, 222 * time.Microsecond, 171 * time.Microsecond, 124 * time.Microsecond}
	if len(latencies) != len(want) {
		t.Fatalf("latencies %v, want %v", latencies, want)
	}
	for i := range want {
		if d := latencies[i] - want[i]; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("latency %d is %v, want %v", i, latencies[i], want[i])
		}
	}
}

func TestParseDnsperfWithoutStatistics(t *testing.T) {
	if _, _, err := parseDnsperf(strings.NewReader("> NOERROR a.example.org A 0.0001\n")); err == nil {
		t.Error("no error for output without statistics")
	}
}

func TestPercentile(t *testing.T) {
	var sorted []time.Duration
	for i := 1; i <= 200; i++ {
		sorted = append(sorted, time.Duration(i))
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 100}, {0.99, 198}, {1, 200}, {0, 1}} {
		if got := percentile(sorted, c.p); got != c.want {
			t.Errorf("percentile(1..200, %v) = %v, want %v", c.p, got, c.want)
		}
	}
}

// A burst that spoils one run of a side moves the median of the runs' p99s
// by at most one run, where it would carry the mean.
func TestP99Statistics(t *testing.T) {
	ms := time.Millisecond
	runs := func(p99s ...time.Duration) []perfRun {
		var rs []perfRun
		for _, p := range p99s {
			rs = append(rs, perfRun{p99: p})
		}
		return rs
	}
	if got := medianP99(runs(4*ms, 5*ms, 40*ms)); got != 5*ms {
		t.Errorf("median of 4, 5, 40 ms = %v, want 5ms", got)
	}
	if got := medianP99(runs(4*ms, 40*ms, 5*ms, 6*ms)); got != 5500*time.Microsecond {
		t.Errorf("median of 4, 40, 5, 6 ms = %v, want 5.5ms", got)
	}
	var a, b []time.Duration
	for i := 1; i <= 100; i++ {
		a = append(a, time.Duration(i))
		b = append(b, time.Duration(100+i))
	}
	pooled := []perfRun{{latencies: a}, {latencies: b}}
	if got := pooledP99(pooled); got != 198 {
		t.Errorf("pooled p99 of 1..200 = %v, want 198", got)
	}
	if got := pooledP99(nil); got != 0 {
		t.Errorf("pooled p99 of no run = %v, want 0", got)
	}
}
