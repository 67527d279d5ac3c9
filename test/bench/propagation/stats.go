package main

import (
	"math"
	"slices"
	"time"
)

// latencies summarize the durations of one measure.
type latencies struct {
	n             int
	p50, p99, max time.Duration
}

func summarize(ds []time.Duration) latencies {
	if len(ds) == 0 {
		return latencies{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return latencies{n: len(s), p50: percentile(s, 50), p99: percentile(s, 99), max: s[len(s)-1]}
}

// percentile is the nearest-rank p-th percentile of sorted: the smallest
// value that at least p% of the values do not exceed.
func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(float64(len(sorted))*p/100)) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}
