package main

import (
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// page renders a /metrics page with mcs_writes_total's series given as
// label strings and values, and one mcs_propagation_seconds histogram with
// buckets of 1, 2 and 4 ms.
func page(writes map[string]float64, buckets [3]int, sum float64) string {
	var b strings.Builder
	b.WriteString("# HELP mcs_writes_total API writes.\n# TYPE mcs_writes_total counter\n")
	for labels, v := range writes {
		b.WriteString("mcs_writes_total{" + labels + "} " + ftoa(v) + "\n")
	}
	b.WriteString("# HELP mcs_propagation_seconds Propagation.\n# TYPE mcs_propagation_seconds histogram\n")
	bounds := []string{"0.001", "0.002", "0.004"}
	for i, le := range bounds {
		b.WriteString(`mcs_propagation_seconds_bucket{le="` + le + `"} ` + ftoa(float64(buckets[i])) + "\n")
	}
	b.WriteString(`mcs_propagation_seconds_bucket{le="+Inf"} ` + ftoa(float64(buckets[2])) + "\n")
	b.WriteString("mcs_propagation_seconds_sum " + ftoa(sum) + "\nmcs_propagation_seconds_count " + ftoa(float64(buckets[2])) + "\n")
	b.WriteString("# HELP workqueue_depth Depth.\n# TYPE workqueue_depth gauge\nworkqueue_depth{name=\"service\"} 3\n")
	return b.String()
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func mustParse(t *testing.T, text string) *scrape {
	t.Helper()
	s, err := parseMetrics(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const (
	sliceUpdate = `cluster="member2",kind="EndpointSlice",verb="update",result="success"`
	leaseUpdate = `cluster="member1",kind="Lease",verb="update",result="success"`
	hubStatus   = `cluster="hub",kind="MultiClusterService",verb="update",result="success"`
)

func TestWritesSince(t *testing.T) {
	before := mustParse(t, page(map[string]float64{sliceUpdate: 5, leaseUpdate: 2}, [3]int{1, 2, 3}, 0.005))
	after := mustParse(t, page(map[string]float64{sliceUpdate: 205, leaseUpdate: 4, hubStatus: 1}, [3]int{1, 2, 3}, 0.005))
	got := after.since(before)
	want := []writeCount{
		{writeKey{"hub", "MultiClusterService", "update", "success"}, 1},
		{writeKey{"member1", "Lease", "update", "success"}, 2},
		{writeKey{"member2", "EndpointSlice", "update", "success"}, 200},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("since = %v, want %v", got, want)
	}
	if got := after.since(after); len(got) != 0 {
		t.Errorf("since itself = %v, want nothing", got)
	}
	if !isLease(want[1]) || isLease(want[2]) {
		t.Error("isLease tells Leases apart wrongly")
	}
}

// Two replicas' pages add up to what one controller doing both's work
// would show.
func TestScrapesOfReplicasAddUp(t *testing.T) {
	sum := mustParse(t, page(map[string]float64{sliceUpdate: 5}, [3]int{1, 2, 3}, 0.005))
	sum.cpu = 1.5
	other := mustParse(t, page(map[string]float64{sliceUpdate: 7, hubStatus: 1}, [3]int{0, 4, 4}, 0.007))
	other.cpu = 2
	sum.add(other)
	if want := map[writeKey]float64{{"member2", "EndpointSlice", "update", "success"}: 12, {"hub", "MultiClusterService", "update", "success"}: 1}; !reflect.DeepEqual(sum.writes, want) {
		t.Errorf("writes = %v, want %v", sum.writes, want)
	}
	h := sum.histograms["mcs_propagation_seconds"]
	if h.count != 7 || math.Abs(h.sum-0.012) > 1e-12 || !reflect.DeepEqual(h.counts, []uint64{1, 6, 7, 7}) {
		t.Errorf("histogram = %+v, want both replicas' 7 observations", h)
	}
	if sum.cpu != 3.5 {
		t.Errorf("cpu = %v, want 3.5", sum.cpu)
	}
}

func TestTimingsSince(t *testing.T) {
	before := mustParse(t, page(nil, [3]int{1, 2, 3}, 0.005))
	after := mustParse(t, page(nil, [3]int{11, 12, 23}, 0.065))
	got := after.timingsSince(before)
	if len(got) != 1 || got[0].series != "mcs_propagation_seconds" {
		t.Fatalf("timingsSince = %+v, want the one histogram", got)
	}
	h := got[0].histogram
	if h.count != 20 || math.Abs(h.sum-0.06) > 1e-9 || !reflect.DeepEqual(h.counts, []uint64{10, 10, 20, 20}) {
		t.Errorf("delta = %+v, want 20 observations: 10 ≤ 1 ms, 10 in (2, 4] ms, sum 0.06", h)
	}
	if len(after.timingsSince(after)) != 0 {
		t.Error("a histogram without new observations is shown")
	}
	if got := after.timingsSince(&scrape{}); len(got) != 1 || got[0].count != 23 {
		t.Errorf("since an empty scrape = %+v, want all 23 observations", got)
	}
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	h := histogram{bounds: []float64{0.001, 0.002, 0.004, inf}, counts: []uint64{10, 10, 20, 20}, count: 20, sum: 0.06}
	tests := []struct {
		q, want float64
	}{
		{0.25, 0.0005},  // within the first bucket, from 0
		{0.5, 0.001},    // the 10th observation is the first bucket's last
		{0.75, 0.003},   // half way into (2, 4] ms
		{0.99, 0.00396}, // rank 19.8: 9.8 of the 10 in (2, 4] ms
	}
	for _, tt := range tests {
		if got := h.quantile(tt.q); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	if got := h.mean(); math.Abs(got-0.003) > 1e-12 {
		t.Errorf("mean = %v, want 0.003", got)
	}
	tail := histogram{bounds: []float64{0.001, inf}, counts: []uint64{1, 4}, count: 4}
	if got := tail.quantile(0.99); !math.IsInf(got, 1) {
		t.Errorf("quantile in +Inf = %v, want +Inf", got)
	}
	if got := quantileText(tail, 0.99); got != "> 1.0 ms" {
		t.Errorf("quantileText in +Inf = %q, want past the highest finite bound", got)
	}
	if got := quantileText(h, 0.75); got != "3.0 ms" {
		t.Errorf("quantileText = %q, want 3.0 ms", got)
	}
	if got := (histogram{}).quantile(0.5); !math.IsNaN(got) {
		t.Errorf("quantile of nothing = %v, want NaN", got)
	}
}

func TestParseMetricsRefusesGarbage(t *testing.T) {
	if _, err := parseMetrics("mcs_writes_total{cluster=\"a\" 1\n"); err == nil || !strings.Contains(err.Error(), "parsing metrics") {
		t.Errorf("want a parse error, got %v", err)
	}
}
