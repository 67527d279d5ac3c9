package main

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// writesMetric counts the controller's API writes.
const writesMetric = "mcs_writes_total"

// timingMetrics are the controller's histograms that say where the time
// goes, in the order the report shows them.
var timingMetrics = []string{
	"mcs_propagation_seconds",
	"mcs_sync_svc_duration_seconds",
	"mcs_sync_eps_duration_seconds",
	"workqueue_queue_duration_seconds",
	"workqueue_work_duration_seconds",
}

// writeKey is one series of mcs_writes_total.
type writeKey struct{ cluster, kind, verb, result string }

// writeCount is how many writes of one series a phase made.
type writeCount struct {
	writeKey
	n float64
}

// histogram is one series of a Prometheus histogram: cumulative counts
// per upper bound, the last bound +Inf.
type histogram struct {
	bounds []float64
	counts []uint64
	count  uint64
	sum    float64
}

// timing is one histogram series' observations during a phase.
type timing struct {
	series string // name{label="value",…}
	histogram
}

// scrape is what the report reads from one /metrics page.
type scrape struct {
	writes     map[writeKey]float64
	histograms map[string]histogram // by series
	cpu        float64              // process_cpu_seconds_total
}

// fetchMetrics scrapes every replica of the controller (-shards) and adds
// their figures up, as a query summing over pods would.
func fetchMetrics(ctx context.Context, urls []string) (*scrape, error) {
	sum := &scrape{writes: map[writeKey]float64{}, histograms: map[string]histogram{}}
	for _, url := range urls {
		families, err := process.Scrape(ctx, url)
		if err != nil {
			return nil, err
		}
		sum.add(fromFamilies(families))
	}
	return sum, nil
}

// add adds o's counts to s's.
func (s *scrape) add(o *scrape) {
	for k, n := range o.writes {
		s.writes[k] += n
	}
	for k, h := range o.histograms {
		if have, ok := s.histograms[k]; ok {
			h = have.plus(h)
		}
		s.histograms[k] = h
	}
	s.cpu += o.cpu
}

// parseMetrics reads mcs_writes_total and the timing histograms from the
// Prometheus text format.
func parseMetrics(text string) (*scrape, error) {
	families, err := process.ParseMetrics(text)
	if err != nil {
		return nil, err
	}
	return fromFamilies(families), nil
}

func fromFamilies(families map[string]*dto.MetricFamily) *scrape {
	s := &scrape{writes: map[writeKey]float64{}, histograms: map[string]histogram{}}
	if f := families[writesMetric]; f != nil {
		for _, m := range f.GetMetric() {
			l := labels(m)
			s.writes[writeKey{l["cluster"], l["kind"], l["verb"], l["result"]}] = m.GetCounter().GetValue()
		}
	}
	for _, m := range families[cpuMetric].GetMetric() {
		s.cpu = m.GetCounter().GetValue()
	}
	for _, name := range timingMetrics {
		f := families[name]
		if f == nil || f.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range f.GetMetric() {
			s.histograms[series(name, m)] = toHistogram(m.GetHistogram())
		}
	}
	return s
}

func labels(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// series names a sample as Prometheus prints it, labels sorted.
func series(name string, m *dto.Metric) string {
	var pairs []string
	for _, l := range m.GetLabel() {
		pairs = append(pairs, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	if len(pairs) == 0 {
		return name
	}
	slices.Sort(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func toHistogram(h *dto.Histogram) histogram {
	out := histogram{count: h.GetSampleCount(), sum: h.GetSampleSum()}
	for _, b := range h.GetBucket() {
		out.bounds = append(out.bounds, b.GetUpperBound())
		out.counts = append(out.counts, b.GetCumulativeCount())
	}
	if n := len(out.bounds); n == 0 || !math.IsInf(out.bounds[n-1], 1) {
		out.bounds = append(out.bounds, math.Inf(1))
		out.counts = append(out.counts, out.count)
	}
	return out
}

// since is the writes made between before and s, by series, sorted.
func (s *scrape) since(before *scrape) []writeCount {
	var out []writeCount
	for k, v := range s.writes {
		if d := v - before.writes[k]; d != 0 {
			out = append(out, writeCount{k, d})
		}
	}
	slices.SortFunc(out, func(a, b writeCount) int {
		return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.kind, b.kind), cmp.Compare(a.verb, b.verb), cmp.Compare(a.result, b.result))
	})
	return out
}

// isLease tells apart the Lease writes, which the controller makes on a
// clock whatever changes, from the rest.
// synced counts the syncs of services the controller made.
func (s *scrape) synced() uint64 {
	var n uint64
	for series, h := range s.histograms {
		if strings.HasPrefix(series, "mcs_sync_svc_duration_seconds") {
			n += h.count
		}
	}
	return n
}

func isLease(w writeCount) bool { return w.kind == "Lease" }

// timingsSince is what each timing histogram observed between before and
// s, series without observations left out, in timingMetrics' order.
func (s *scrape) timingsSince(before *scrape) []timing {
	var out []timing
	for k, h := range s.histograms {
		if d := h.minus(before.histograms[k]); d.count > 0 {
			out = append(out, timing{k, d})
		}
	}
	rank := func(series string) int {
		return slices.IndexFunc(timingMetrics, func(name string) bool { return strings.HasPrefix(series, name+"{") || series == name })
	}
	slices.SortFunc(out, func(a, b timing) int {
		return cmp.Or(cmp.Compare(rank(a.series), rank(b.series)), cmp.Compare(a.series, b.series))
	})
	return out
}

// minus is h's observations that o had not made; o is an earlier scrape of
// the same series (empty when the series was not there yet).
func (h histogram) minus(o histogram) histogram { return h.with(o, -1) }

// plus adds o's observations to h's; o has the same buckets.
func (h histogram) plus(o histogram) histogram { return h.with(o, 1) }

// with adds (sign 1) or takes away (-1) o's observations; o of other
// buckets (none) changes nothing.
func (h histogram) with(o histogram, sign int) histogram {
	if len(o.counts) != len(h.counts) {
		return h
	}
	add := func(a, b uint64) uint64 {
		if sign < 0 {
			return a - b
		}
		return a + b
	}
	d := histogram{bounds: h.bounds, count: add(h.count, o.count), sum: h.sum + float64(sign)*o.sum, counts: make([]uint64, len(h.counts))}
	for i := range h.counts {
		d.counts[i] = add(h.counts[i], o.counts[i])
	}
	return d
}

// top is the highest finite bucket bound.
func (h histogram) top() float64 {
	if n := len(h.bounds); n > 1 {
		return h.bounds[n-2]
	}
	return math.NaN()
}

func (h histogram) mean() float64 { return h.sum / float64(h.count) }

// quantile estimates the q-quantile as Prometheus's histogram_quantile does:
// linear within the bucket that holds it. It is +Inf when that is the +Inf
// bucket (past top), NaN without observations.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.count)
	i, _ := slices.BinarySearchFunc(h.counts, rank, func(c uint64, r float64) int { return cmp.Compare(float64(c), r) })
	i = min(i, len(h.counts)-1)
	if math.IsInf(h.bounds[i], 1) {
		return math.Inf(1)
	}
	lower, below := 0.0, uint64(0)
	if i > 0 {
		lower, below = h.bounds[i-1], h.counts[i-1]
	}
	in := h.counts[i] - below
	if in == 0 {
		return h.bounds[i]
	}
	return lower + (h.bounds[i]-lower)*(rank-float64(below))/float64(in)
}
