package main

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 200; i >= 1; i-- { // out of order: summarize sorts
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarize(ds)
	want := latencies{n: 200, p50: 100 * time.Millisecond, p99: 198 * time.Millisecond, max: 200 * time.Millisecond}
	if got != want {
		t.Errorf("summarize(1..200 ms) = %+v, want %+v", got, want)
	}
	if ds[0] != 200*time.Millisecond {
		t.Error("summarize reordered its argument")
	}
	if got := summarize(nil); got != (latencies{}) {
		t.Errorf("summarize(nil) = %+v, want zero", got)
	}
}

func TestPercentileNearestRank(t *testing.T) {
	tests := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{[]time.Duration{7}, 50, 7},
		{[]time.Duration{7}, 99, 7},
		{[]time.Duration{1, 2}, 50, 1},
		{[]time.Duration{1, 2}, 51, 2},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 99, 10},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 90, 9},
		{[]time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0, 1},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.p); got != tt.want {
			t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
		}
	}
}
