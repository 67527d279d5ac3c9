package main

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchreport"
)

func sliceUpdates(n float64) writeCount {
	return writeCount{writeKey{consumerCluster, "EndpointSlice", "update", "success"}, n}
}

func TestWritesVerdict(t *testing.T) {
	lease := writeCount{writeKey{providerCluster, "Lease", "update", "success"}, 12}
	tests := []struct {
		name   string
		writes []writeCount
		want   string
	}{
		{"one update per change, Leases aside", []writeCount{lease, sliceUpdates(200)}, "exactly one EndpointSlice update in member2 per change (200), nothing else. Target met."},
		{"two per change", []writeCount{sliceUpdates(400)}, "EndpointSlice updates for 200 changes: 400 in member2 (2.00 per change and consumer). Target not met."},
		{"none", nil, "EndpointSlice updates for 200 changes: 0 in member2 (0.00 per change and consumer). Target not met."},
		{"more than slices", []writeCount{sliceUpdates(200), {writeKey{"hub", "MultiClusterService", "update", "success"}, 200}},
			"1.00 EndpointSlice updates per change and consumer, and more: 200 hub MultiClusterService update (success). Target not met."},
		{"failed updates", []writeCount{sliceUpdates(200), {writeKey{consumerCluster, "EndpointSlice", "update", "error"}, 3}},
			"1.00 EndpointSlice updates per change and consumer, and more: 3 member2 EndpointSlice update (error). Target not met."},
	}
	for _, tt := range tests {
		if got := writesVerdict(&phase{changes: 200, writes: tt.writes}, []string{consumerCluster}); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// With two consumers, each must get one update per change.
func TestWritesVerdictConsumers(t *testing.T) {
	consumers := []string{consumerCluster, "member3"}
	member3 := func(n float64) writeCount {
		return writeCount{writeKey{"member3", "EndpointSlice", "update", "success"}, n}
	}
	tests := []struct {
		name   string
		writes []writeCount
		want   string
	}{
		{"one each", []writeCount{sliceUpdates(200), member3(200)}, "exactly one EndpointSlice update in each of member2 and member3 per change (200), nothing else. Target met."},
		{"member3 short", []writeCount{sliceUpdates(200), member3(150)}, "EndpointSlice updates for 200 changes: 150 in member3 (0.88 per change and consumer). Target not met."},
		{"all in member2", []writeCount{sliceUpdates(400)}, "EndpointSlice updates for 200 changes: 400 in member2, 0 in member3 (1.00 per change and consumer). Target not met."},
	}
	for _, tt := range tests {
		if got := writesVerdict(&phase{changes: 200, writes: tt.writes}, consumers); got != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

func TestRestartVerdict(t *testing.T) {
	lease := writeCount{writeKey{consumerCluster, "Lease", "update", "success"}, 4}
	if got, want := restartVerdict(&phase{writes: []writeCount{lease}}), "no write but Leases. Target met."; got != want {
		t.Errorf("Leases alone: %q, want %q", got, want)
	}
	status := writeCount{writeKey{"hub", "MultiClusterService", "update-status", "success"}, 2}
	if got, want := restartVerdict(&phase{writes: []writeCount{lease, status}}), "wrote 2 hub MultiClusterService update-status (success). Target (no write) not met."; got != want {
		t.Errorf("a status write: %q, want %q", got, want)
	}
}

func TestMarkdown(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var out []time.Duration
		for _, v := range vs {
			out = append(out, time.Duration(v)*time.Millisecond)
		}
		return out
	}
	prop := histogram{bounds: []float64{0.001, 0.002}, counts: []uint64{1, 2}, count: 2, sum: 0.0025}
	r := &results{
		opts:      options{shards: 1, services: 2, endpoints: 3, namespace: "mcs-prop", changes: 2, controllerArgs: []string{"--workers=8"}, consumers: []string{consumerCluster}, join: "member3"},
		consumers: []string{consumerCluster}, initialConsumers: []string{consumerCluster},
		join: &phase{name: "join", changes: 2, took: 700 * time.Millisecond, writes: []writeCount{{writeKey{"member3", "EndpointSlice", "create", "success"}, 2}}},
		initialAPI: []apiPhase{{cluster: consumerCluster, maxInflight: 16, cpu: 0.01,
			requests: []timing{{"POST endpointslices", histogram{bounds: []float64{0.005, math.Inf(1)}, counts: []uint64{2, 2}, count: 2, sum: 0.004}}}}},
		ceiling: []ceilingLevel{{inFlight: 16, services: 1, writes: 4, took: 40 * time.Millisecond, api: []apiPhase{{cluster: consumerCluster, cpu: 0.008}}}},
		Run:     benchreport.Run{Started: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), Load: "1.00 2.00 3.00", Elapsed: time.Minute},
		objects: objectCounts{total: 6, written: 6, took: 2 * time.Second},
		initial: &phase{name: "initial sync", changes: 2, took: 1500 * time.Millisecond, writes: []writeCount{{writeKey{"hub", "MultiClusterService", "update", "success"}, 4}}},
		single: &phase{name: "single changes", changes: 2, perChange: true, cpu: 0.01, seen: ms(20, 40), answered: ms(30, 600), writes: []writeCount{sliceUpdates(2)},
			timings: []timing{{"mcs_propagation_seconds", prop}, {`mcs_sync_svc_duration_seconds{result="success"}`, prop}, {`mcs_sync_svc_duration_seconds{result="error"}`, prop}}},
		burst:            &phase{name: "burst", changes: 2, seen: ms(50, 60), answered: ms(70, 80), took: 90 * time.Millisecond, acked: 10 * time.Millisecond, writes: []writeCount{sliceUpdates(3)}},
		restart:          &phase{name: "restart", changes: 2, took: 3 * time.Second, writes: []writeCount{{writeKey{consumerCluster, "Lease", "update", "success"}, 2}}},
		rssInitial:       []int64{30 << 20},
		heapInitial:      []int64{12 << 20},
		rssBurst:         []int64{31<<20 + 1<<19},
		rssDNS:           20 << 20,
		controllerErrors: []string{"E1122 sync failed"},
		order: &orderCost{services: 2, took: 4 * time.Second,
			before: footprint{services: 2, slices: 2, rules: 100, elements: 10},
			after:  footprint{services: 4, providerServices: 2, slices: 4, providerSlices: 2, rules: 110, elements: 16}},
	}
	got := r.markdown()
	for _, want := range []string{
		"2026-11-22 10:00 UTC",
		"load average 1.00 2.00 3.00 at the start (a machine shared with other work)",
		"flags: defaults but `--workers=8`",
		"| one change at a time → imported slice seen in member2 (watch) | 2 | 20.0 ms | 40.0 ms | 40.0 ms | p50 ≤ 100 ms, p99 ≤ 500 ms | yes |",
		"| one change at a time → member2's coredns-mcs answers the new address | 2 | 30.0 ms | 600.0 ms | 600.0 ms | p50 ≤ 100 ms, p99 ≤ 500 ms | no |",
		"| burst of 2 → new answer, per service | 2 | 70.0 ms | 80.0 ms | 80.0 ms | | |\n",
		"| burst of 2: first update sent → last one acknowledged (the benchmark's own writes) | | | | 10.0 ms | | |",
		"| burst of 2: first update sent → every answer new | | | | 90.0 ms | | |",
		"| initial sync of 2 services: controller started → every answer there | | | | 1500.0 ms | | |",
		"| initial sync | hub | MultiClusterService | update | success | 4 | 2.00 |",
		"| single changes | member2 | EndpointSlice | update | success | 2 | 1.00 |",
		"- single changes: exactly one EndpointSlice update in member2 per change (2), nothing else. Target met. 2.00 syncs per change.",
		"- burst: EndpointSlice updates for 2 changes: 3 in member2 (1.50 per change and consumer). Target not met. 0.00 syncs per change.",
		"| single changes | `mcs_propagation_seconds` | 2 | 1.2 ms | 1.0 ms | 2.0 ms |",
		"- restart over the unchanged world: no write but Leases. Target met. Every service synced 3s after the restart.",
		"bin/mcs-controller (one replica, flags: defaults but `--workers=8`)",
		"| initial sync, 2 services into member2: controller started → every answer there | 1.5s | — (not this fixture's) | |",
		"| member3 joins a 2-service fleet → every service imported there | 700ms | — (not this fixture's) | |",
		"| API writes per service at the initial sync | hub 2.00, member2 0.00 | the floor: hub 2, each consumer 5 | no |",
		"| mcs-controller VmRSS (the most of its replicas) | 30.0 MiB | — (150 MiB at 10,000 × 3 members) | |",
		"- resident memory (VmRSS): the controller 30.0 MiB after the initial sync (Go heap in use 12.0 MiB), 31.5 MiB after the burst; member2's coredns-mcs 20.0 MiB after the initial sync.",
		"logged 1 error lines; the first:\n\n```\nE1122 sync failed\n```",
		"| member3 joins (member Secret created) → every service imported there (watch) | | | | 700.0 ms | | |",
		"| join | member3 | EndpointSlice | create | success | 2 | 1.00 |",
		"| initial sync | member2 | POST endpointslices | 2 | 2.0 ms | 5.0 ms |",
		"- initial sync, member2: 2 writes, 1 per second over the 1.5s; at most 16 mutating requests in flight; the API server used 0.0 s of CPU, 5.0 ms per write.",
		"- ceiling, 16 services at once: 4 writes (derived Service, ServiceImport, its status, slice per service) in 40ms, 100 per second; at most 0 mutating requests in flight; the API server used 0.0 s of CPU, 2.0 ms per write.",
		"- the initial sync wrote into member2 at 1 per second: 0.01 of its ceiling (100 per second, 16 at once).",
		"- the controller's CPU (process_cpu_seconds_total) during single changes: 0.0 s, 5.00 ms per change.",
		"2 of the services given LocalFirst with `failoverOrder: [member1]`",
		"were there, and kube-proxy settled, 4s after the orders were written.",
		"| ClusterIP Services (ClusterIPs) | 2 | 4 | 1.00 |",
		"| EndpointSlices | 2 | 4 | 1.00 |",
		"| kube-proxy nftables rules (a Service's one rule holds its endpoints in a map of its own) | 100 | 110 | 5.00 |",
		"| kube-proxy map and set elements | 10 | 16 | 3.00 |",
		"Whole run: 1m0s.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}

	r.opts.shards, r.rssInitial, r.heapInitial, r.rssBurst = 2, []int64{30 << 20, 25 << 20}, []int64{12 << 20, 10 << 20}, []int64{31 << 20, 26 << 20}
	got = r.markdown()
	for _, want := range []string{
		"bin/mcs-controller (2 replicas started together, each campaigning for `--shards 2`'s Leases, flags: defaults but `--workers=8`)",
		"- resident memory (VmRSS): the controller's 2 replicas (`--shards 2`), each 30.0 / 25.0 MiB after the initial sync (Go heap in use 12.0 / 10.0 MiB), 31.0 / 26.0 MiB after the burst;",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("sharded report lacks %q:\n%s", want, got)
		}
	}
}

// The scale fixture's figures stand beside their targets.
func TestScaleTableTargets(t *testing.T) {
	writes := func(cluster string, kinds ...string) []writeCount {
		var out []writeCount
		for _, k := range kinds {
			out = append(out, writeCount{writeKey{cluster, k, "create", "success"}, 10000})
		}
		return out
	}
	r := &results{
		opts:             options{shards: 2, services: 10000, headless: true, join: "member3"},
		initialConsumers: []string{providerCluster, consumerCluster},
		consumers:        []string{providerCluster, consumerCluster, "member3"},
		initial: &phase{took: 170 * time.Second, writes: slices.Concat(
			writes(hubCluster, "MultiClusterService", "MultiClusterService"),
			writes(providerCluster, "Service", "ServiceImport", "ServiceImport", "EndpointSlice"),
			writes(consumerCluster, "Service", "ServiceImport", "ServiceImport", "EndpointSlice"),
			[]writeCount{{writeKey{consumerCluster, "Lease", "update", "success"}, 200}})},
		join:       &phase{took: 150 * time.Second},
		rssInitial: []int64{100 << 20, 151 << 20},
	}
	var b strings.Builder
	r.scaleTable(&b)
	for _, want := range []string{
		"| initial sync, 10000 headless services into member1 and member2: controller started → every answer there | 2m50s | ≤ 3m0s | yes |",
		"| member3 joins a 10000-service fleet → every service imported there | 2m30s | ≤ 2m0s | no |",
		"| API writes per service at the initial sync | hub 2.00, member1 4.00, member2 4.00 | the floor: hub 2, each consumer 4 | yes |",
		"| mcs-controller VmRSS, 10000 services × 3 members (the most of its replicas) | 151.0 MiB | ≤ 150 MiB | no |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("scale table lacks %q:\n%s", want, b.String())
		}
	}
}
