//go:build lab

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// metrics are the samples of a /metrics page by series (see series).
type metrics map[string]float64

// series names a sample: the metric and its labels as name=value pairs
// sorted, e.g. series("up", "job", "x") is `up{job="x"}`.
func series(name string, labelPairs ...string) string {
	var labels []string
	for i := 0; i+1 < len(labelPairs); i += 2 {
		labels = append(labels, fmt.Sprintf("%s=%q", labelPairs[i], labelPairs[i+1]))
	}
	if len(labels) == 0 {
		return name
	}
	slices.Sort(labels)
	return name + "{" + strings.Join(labels, ",") + "}"
}

// scrape reads the process's /metrics.
func (p *coredns) scrape(t *testing.T) metrics {
	t.Helper()
	m, err := p.metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func (p *coredns) metrics(ctx context.Context) (metrics, error) { return getMetrics(ctx, p.metricsURL) }

// getMetrics reads a /metrics page into samples by series. Histograms and
// summaries give their _sum and _count (the tests read neither buckets nor
// quantiles).
func getMetrics(ctx context.Context, url string) (metrics, error) {
	families, err := process.Scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	out := metrics{}
	for name, fam := range families {
		for _, m := range fam.GetMetric() {
			var pairs []string
			for _, l := range m.GetLabel() {
				pairs = append(pairs, l.GetName(), l.GetValue())
			}
			switch fam.GetType() {
			case dto.MetricType_COUNTER:
				out[series(name, pairs...)] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[series(name, pairs...)] = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				out[series(name, pairs...)] = m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[series(name+"_sum", pairs...)] = m.GetHistogram().GetSampleSum()
				out[series(name+"_count", pairs...)] = float64(m.GetHistogram().GetSampleCount())
			case dto.MetricType_SUMMARY:
				out[series(name+"_sum", pairs...)] = m.GetSummary().GetSampleSum()
				out[series(name+"_count", pairs...)] = float64(m.GetSummary().GetSampleCount())
			}
		}
	}
	return out, nil
}

// expectMetric waits until the sample of s is want.
func (p *coredns) expectMetric(t *testing.T, s string, want float64) {
	t.Helper()
	labtest.Eventually(t, answerTimeout, func(ctx context.Context) error {
		m, err := p.metrics(ctx)
		if err != nil {
			return err
		}
		if got, ok := m[s]; !ok || got != want {
			return fmt.Errorf("%s = %v (present: %t), want %v", s, got, ok, want)
		}
		return nil
	})
}

// requests is the series of coredns_mcs_requests_total.
func requests(s *server, zone, strategy, outcome string) string {
	return series("coredns_mcs_requests_total", "server", "dns://"+s.addr, "zone", zone, "strategy", strategy, "outcome", outcome)
}

// mcsCounters are the metrics that count mcs's answers.
var mcsCounters = []string{"coredns_mcs_requests_total", "coredns_mcs_local_fallbacks_total"}

// deltas are the samples of metrics names that differ between before and
// after, by how much.
func deltas(before, after metrics, names []string) map[string]float64 {
	out := map[string]float64{}
	for s, v := range after {
		name, _, _ := strings.Cut(s, "{")
		if slices.Contains(names, name) && v != before[s] {
			out[s] = v - before[s]
		}
	}
	return out
}

// TestMetrics: the prometheus plugin exports mcs's metrics: informers
// synced, and one request counted per answer by zone, strategy and outcome,
// with LocalFirst fallbacks counted apart.
func TestMetrics(t *testing.T) {
	srv := startServers(t)
	for _, r := range []string{"services", "endpointslices", "namespaces", "leases", "serviceimports"} {
		srv.proc.expectMetric(t, series("coredns_mcs_informers_synced", "resource", r), 1)
	}
	f := newFixture(t)
	f.apply(
		f.service("lf", false),
		f.serviceImport("lf", importSpec{strategy: localFirst, ips: []string{setVIP}}),
		f.ownSlice("lf", ep("10.10.9.1")),
		f.importedSlice("lf", member2, ep("10.12.9.1")),
		f.serviceImport("ral", importSpec{strategy: remoteAndLocal, ips: []string{setVIP}}),
		f.importedSlice("ral", member2, ep("10.12.9.2")),
		f.service("plain", false),
	)
	s := srv.vip
	lf, ral, ralSet, missing := f.native("lf"), f.native("ral"), f.clusterset("ral"), f.clusterset("missing")
	for _, c := range []struct {
		name    string
		change  func() // nil: none
		qname   string
		want    reply
		counted []string // series that one query adds 1 to; no other counter of mcs changes
	}{
		{"LocalFirst local", nil, lf, answer(s.addrs(lf, f.clusterIP("lf"))),
			[]string{requests(s, "cluster.local.", localFirst, "local")}},
		{"LocalFirst fallback", func() { f.apply(f.ownSlice("lf", ep("10.10.9.1").unready())) }, lf, answer(s.addrs(lf, setVIP)),
			[]string{requests(s, "cluster.local.", localFirst, "remote"), series("coredns_mcs_local_fallbacks_total")}},
		{"RemoteAndLocal", nil, ral, answer(s.addrs(ral, setVIP)),
			[]string{requests(s, "cluster.local.", remoteAndLocal, "combined")}},
		{"clusterset", nil, ralSet, answer(s.addrs(ralSet, setVIP)),
			[]string{requests(s, "clusterset.local.", "none", "combined")}},
		{"clusterset NXDOMAIN", nil, missing, s.nxdomain("clusterset.local."),
			[]string{requests(s, "clusterset.local.", "none", "nxdomain")}},
		{"not multi-cluster: not counted", nil, f.native("plain"), answer(s.addrs(f.native("plain"), f.clusterIP("plain"))), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.change != nil {
				c.change()
			}
			s.expect(t, c.qname, dns.TypeA, c.want)
			before := srv.proc.scrape(t)
			if _, err := s.ask(t.Context(), c.qname, dns.TypeA, "udp"); err != nil {
				t.Fatal(err)
			}
			got := deltas(before, srv.proc.scrape(t), mcsCounters)
			want := map[string]float64{}
			for _, s := range c.counted {
				want[s] = 1
			}
			if !maps.Equal(got, want) {
				t.Errorf("one query of %s changed %v, want %v", c.qname, got, want)
			}
		})
	}
}
