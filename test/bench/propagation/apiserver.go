package main

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"

	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// The API servers' own view of a phase, read from their /metrics: how long
// each kind of write took them, and how many mutating requests they had in
// flight at most. Beside the controller's figures, they say whether the
// API servers or the controller set the pace.
const (
	requestMetric  = "apiserver_request_duration_seconds"
	inflightMetric = "apiserver_current_inflight_requests"
	cpuMetric      = "process_cpu_seconds_total"
	// A /metrics page of an API server is megabytes: about 0.2 s of CPU
	// to parse here, and more for the API server to render. Every 2 s
	// over a 10,000-service sync's three API servers that was 0.4 of the
	// two cores the sync measures; the ceiling's loads last seconds, and
	// their in-flight peak needs the finer samples.
	syncSampleEvery    = 10 * time.Second
	ceilingSampleEvery = 2 * time.Second
)

// writeVerbs are the requests a write phase is about.
var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE"}

// apiView is one API server's /metrics at one moment.
type apiView struct {
	requests map[string]histogram // by "VERB resource[/subresource]"
	inflight float64              // mutating requests in flight
	cpu      float64              // CPU seconds the API server has used
}

// apiPhase is what one API server did during a phase.
type apiPhase struct {
	cluster     string
	requests    []timing // writes during the phase, by verb and resource
	maxInflight float64  // the most mutating requests in flight seen
	cpu         float64  // CPU seconds the API server used
}

// apiSampler samples the API servers' /metrics until stopped.
type apiSampler struct {
	clusters []string
	clients  map[string]kubernetes.Interface
	stopCh   chan struct{}
	wg       sync.WaitGroup

	mu            sync.Mutex
	first, latest map[string]*apiView
	maxInflight   map[string]float64
}

// sampleAPIServers starts sampling the clusters' API servers every
// interval; stop returns what each did meanwhile. A failed sample is
// skipped: the API servers' figures are a view, not the measure.
func (w *world) sampleAPIServers(ctx context.Context, clusters []string, every time.Duration) *apiSampler {
	s := &apiSampler{clusters: clusters, clients: w.clients, stopCh: make(chan struct{}),
		first: map[string]*apiView{}, latest: map[string]*apiView{}, maxInflight: map[string]float64{}}
	s.sample(ctx)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.sample(ctx)
			case <-s.stopCh:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

func (s *apiSampler) sample(ctx context.Context) {
	for _, c := range s.clusters {
		v, err := scrapeAPIServer(ctx, s.clients[c])
		if err != nil {
			continue
		}
		s.mu.Lock()
		if s.first[c] == nil {
			s.first[c] = v
		}
		s.latest[c] = v
		s.maxInflight[c] = max(s.maxInflight[c], v.inflight)
		s.mu.Unlock()
	}
}

// stop takes a last sample and returns each API server's phase.
func (s *apiSampler) stop(ctx context.Context) []apiPhase {
	close(s.stopCh)
	s.wg.Wait()
	s.sample(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []apiPhase
	for _, c := range s.clusters {
		first, latest := s.first[c], s.latest[c]
		if first == nil {
			continue
		}
		p := apiPhase{cluster: c, maxInflight: s.maxInflight[c], cpu: latest.cpu - first.cpu}
		for _, k := range slices.Sorted(maps.Keys(latest.requests)) {
			if d := latest.requests[k].minus(first.requests[k]); d.count > 0 {
				p.requests = append(p.requests, timing{series: k, histogram: d})
			}
		}
		out = append(out, p)
	}
	return out
}

func scrapeAPIServer(ctx context.Context, client kubernetes.Interface) (*apiView, error) {
	body, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	families, err := process.ParseMetrics(string(body))
	if err != nil {
		return nil, err
	}
	return apiViewOf(families), nil
}

func apiViewOf(families map[string]*dto.MetricFamily) *apiView {
	v := &apiView{requests: map[string]histogram{}}
	for _, m := range families[requestMetric].GetMetric() {
		l := labels(m)
		if !slices.Contains(writeVerbs, l["verb"]) || l["dry_run"] != "" {
			continue
		}
		k := l["verb"] + " " + strings.TrimSuffix(l["resource"]+"/"+l["subresource"], "/")
		h := toHistogram(m.GetHistogram())
		if have, ok := v.requests[k]; ok { // the same request in another version
			h = h.plus(have)
		}
		v.requests[k] = h
	}
	for _, m := range families[inflightMetric].GetMetric() {
		if labels(m)["request_kind"] == "mutating" {
			v.inflight = m.GetGauge().GetValue()
		}
	}
	for _, m := range families[cpuMetric].GetMetric() {
		v.cpu = m.GetCounter().GetValue()
	}
	return v
}

// writes is how many writes the API server answered during the phase.
func (p apiPhase) writes() uint64 {
	var n uint64
	for _, r := range p.requests {
		n += r.count
	}
	return n
}
