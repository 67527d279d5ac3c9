// Command propagation measures how fast mcs-controller carries an endpoint
// change in a provision cluster to a consumption cluster, and what it costs
// in API writes, with the real bin/mcs-controller and bin/coredns-mcs on the
// lab: a source EndpointSlice update in member1 → the imported slice seen in
// member2 → member2's coredns-mcs answering the new address. It prints a
// markdown table beside the targets of README.md (Performance) and writes it
// to _output/bench/propagation.md. See test/bench/README.md (Propagation).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchreport"
)

// The lab's clusters this benchmark uses: the MultiClusterServices live on
// the hub, the services in the provider, their imports in the consumers
// (-consumers), of which the first, member2, also gets a coredns-mcs.
const (
	hubCluster      = "hub"
	providerCluster = "member1"
	consumerCluster = "member2"
)

// maxShards bounds -shards: each replica holds the members' own objects
// whole, and the lab's two cores run them all.
const maxShards = 8

// allConsumers is the most -consumers may name.
var allConsumers = []string{consumerCluster, "member3"}

// options are the command line.
type options struct {
	kubeconfig, controller, coredns string
	namespace, outDir, report       string
	controllerArgs                  []string // more flags for mcs-controller
	consumers                       []string // consumption clusters, member2 first
	join                            string   // a consumption cluster that joins after the initial sync
	headless                        bool

	services, endpoints, changes, workers int
	ceilingServices                       int
	orderServices                         int   // services given a failover order to measure what it costs
	shards                                int   // replicas of the controller, one shard each
	ceilingInFlight                       []int // the plain write loads, by services at once

	convergeTimeout, changeTimeout, burstTimeout, timeout time.Duration
	cleanupTimeout                                        time.Duration
	keep                                                  bool
}

func parseFlags() (options, error) {
	var o options
	var extra, consumers, inFlight string
	flag.StringVar(&o.kubeconfig, "kubeconfig", "_output/lab/kubeconfig", "kubeconfig of the lab (contexts hub, member1, member2)")
	flag.StringVar(&o.controller, "controller", "bin/mcs-controller", "the mcs-controller binary")
	flag.StringVar(&o.coredns, "coredns", "bin/coredns-mcs", "the coredns-mcs binary")
	flag.StringVar(&o.namespace, "namespace", "mcs-prop", "namespace of the benchmark's objects in the hub, member1 and member2")
	flag.StringVar(&o.outDir, "out", "_output/bench", "directory of the report; kubeconfigs, Corefile and logs go to a directory named after the report")
	flag.StringVar(&o.report, "report", "propagation.md", "file name of the report in -out")
	flag.StringVar(&extra, "controller-args", "", "more flags for mcs-controller, space-separated (e.g. '--kube-api-qps=500 --workers=8'); with --profiling, its heap profile after the initial sync is saved as controller-heap.pprof beside its log")
	flag.StringVar(&consumers, "consumers", consumerCluster, "consumption clusters, comma-separated: member2, and member3 too for three members")
	flag.StringVar(&o.join, "join", "", "a consumption cluster (member3) that joins once the initial sync is done, through a member Secret as kubectl mcs join makes; the MultiClusterServices then leave their consumption clusters to the fleet (every member: member1 takes its own back too)")
	flag.BoolVar(&o.headless, "headless", false, "headless Services (clusterIP None), so that no ClusterIP is allocated: the lab's allocator is O(n²) in Services")
	flag.IntVar(&o.services, "services", 1000, "services, each with one source EndpointSlice and one MultiClusterService")
	flag.IntVar(&o.endpoints, "endpoints", 3, "ready endpoints per source slice; a change moves the first one to a new address")
	flag.IntVar(&o.changes, "changes", 200, "single changes, one at a time, round-robin over the services")
	flag.IntVar(&o.workers, "workers", 32, "concurrent API writes of the benchmark itself (objects and the burst)")
	flag.IntVar(&o.orderServices, "order-services", 100, "services given LocalFirst with a failover order at the end, to count what their provider Services cost the consumer (0, or -headless: none)")
	flag.IntVar(&o.ceilingServices, "ceiling-services", 500, "services of each plain write load that measures the consumer's API server's ceiling (0: none)")
	flag.StringVar(&inFlight, "ceiling-in-flight", "1,16,64", "services written at once by the plain write loads, comma-separated")
	flag.DurationVar(&o.convergeTimeout, "converge-timeout", 5*time.Minute, "bound on the initial sync of every service")
	flag.DurationVar(&o.changeTimeout, "change-timeout", 10*time.Second, "bound on one single change to be seen and answered")
	flag.DurationVar(&o.burstTimeout, "burst-timeout", 3*time.Minute, "bound on the burst")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "bound on the whole run, cleanup excepted")
	flag.DurationVar(&o.cleanupTimeout, "cleanup-timeout", 10*time.Minute, "bound on the cleanup")
	flag.IntVar(&o.shards, "shards", 1, "replicas of mcs-controller started together with --shards N and leader election, as deploy/components/shards runs them; their memory is reported each, their writes and syncs added up")
	flag.BoolVar(&o.keep, "keep", false, "keep the objects at the end (a rerun then skips writing them)")
	if err := benchreport.ParseFlags(); err != nil {
		return o, err
	}
	o.controllerArgs = strings.Fields(extra)
	o.consumers = strings.Split(consumers, ",")
	for _, f := range strings.Split(inFlight, ",") {
		k, err := strconv.Atoi(f)
		if err != nil || k < 1 {
			return o, fmt.Errorf("-ceiling-in-flight: %q is not a positive number", f)
		}
		o.ceilingInFlight = append(o.ceilingInFlight, k)
	}
	return o, o.validate()
}

func (o *options) validate() error {
	switch {
	case o.services < 1 || o.services > maxServices:
		return fmt.Errorf("-services must be in 1..%d (the address plan)", maxServices)
	case o.endpoints < 1 || o.endpoints > maxEndpoints:
		return fmt.Errorf("-endpoints must be in 1..%d (the address plan)", maxEndpoints)
	case o.changes < 1 || o.workers < 1:
		return errors.New("-changes and -workers must be positive")
	case o.join != "" && (o.join != allConsumers[1] || !slices.Equal(o.consumers, allConsumers[:1])):
		return fmt.Errorf("-join must be %s, with -consumers %s", allConsumers[1], consumerCluster)
	case o.shards < 1 || o.shards > maxShards:
		return fmt.Errorf("-shards must be in 1..%d", maxShards)
	case o.orderServices < 0 || o.orderServices > o.services:
		return fmt.Errorf("-order-services must be in 0..%d (-services)", o.services)
	case o.ceilingServices < 0 || o.ceilingServices > maxServices:
		return fmt.Errorf("-ceiling-services must be in 0..%d (the address plan)", maxServices)
	case !slices.Equal(o.consumers, allConsumers[:1]) && !slices.Equal(o.consumers, allConsumers):
		return fmt.Errorf("-consumers must be %s or %s", consumerCluster, strings.Join(allConsumers, ","))
	case o.convergeTimeout <= 0 || o.changeTimeout <= 0 || o.burstTimeout <= 0 || o.timeout <= 0 || o.cleanupTimeout <= 0:
		return errors.New("timeouts must be positive")
	}
	return benchreport.Abs(&o.kubeconfig, &o.controller, &o.coredns, &o.outDir)
}

// The first signal ends the phases and starts the cleanup; a second one
// ends the program (its processes get SIGTERM from the kernel).
func main() { benchreport.Main("propagation", benchreport.SecondSignalEnds, parseFlags, run) }

// run does every phase. Whatever happens, the processes it started are
// stopped and, unless -keep, its objects are deleted: first the
// MultiClusterServices, while the controller runs to honour their
// finalizers, then the namespaces.
func run(ctx context.Context, o options) (err error) {
	res := &results{opts: o, Run: benchreport.Start()}
	dir := filepath.Join(o.outDir, strings.TrimSuffix(o.report, ".md"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	w, err := newWorld(o)
	if err != nil {
		return fmt.Errorf("connecting to the lab: %w", err)
	}
	procs := &processes{opts: o, dir: dir}
	defer procs.stopAll()
	if !o.keep {
		defer func() { err = errors.Join(err, w.cleanup(procs)) }()
	}
	runCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := measure(runCtx, w, procs, res); err != nil {
		return err
	}
	return res.Finish(os.Stdout, filepath.Join(o.outDir, o.report), res.markdown)
}

// measure runs the phases in order; each error names its phase.
func measure(ctx context.Context, w *world, procs *processes, res *results) error {
	var err error
	if res.objects, err = w.ensure(ctx); err != nil {
		return fmt.Errorf("objects: %w", err)
	}
	watch, err := watchImports(ctx, w)
	if err != nil {
		return fmt.Errorf("watching member2: %w", err)
	}
	defer watch.stop()
	defer func() { res.controllerErrors = procs.controllerErrors() }()
	cpu := sampleCPU()
	sampler := w.sampleAPIServers(ctx, append([]string{hubCluster}, w.consumers(false)...), syncSampleEvery)
	if err := procs.start(ctx, w); err != nil {
		return fmt.Errorf("starting the processes: %w", err)
	}
	b := &bench{w: w, watch: watch, procs: procs, dns: newResolver(procs.dnsAddr()), metricsURLs: procs.metricsURLs(), consumers: w.consumers(false)}
	res.initialConsumers = b.consumers
	if res.initial, err = b.converge(ctx); err != nil {
		return fmt.Errorf("initial sync: %w", err)
	}
	res.initialAPI, res.initialCPU = sampler.stop(ctx), sampleCPU().since(cpu)
	if w.opts.join != "" {
		if res.join, err = b.joinCluster(ctx); err != nil {
			return fmt.Errorf("join: %w", err)
		}
	}
	res.consumers = b.consumers
	if res.single, err = b.singleChanges(ctx); err != nil {
		return fmt.Errorf("single changes: %w", err)
	}
	if res.rssInitial, err = procs.controllerRSS(); err != nil {
		return fmt.Errorf("controller memory: %w", err)
	}
	if res.heapInitial, err = procs.controllerHeap(ctx); err != nil {
		return fmt.Errorf("controller memory: %w", err)
	}
	if slices.Contains(w.opts.controllerArgs, "--profiling") {
		paths, err := procs.saveHeapProfiles(ctx)
		if err != nil {
			return err
		}
		log.Printf("the controller's heap profiles after the initial sync: go tool pprof %s", strings.Join(paths, ", "))
	}
	if res.rssDNS, err = procs.corednsRSS(); err != nil {
		return fmt.Errorf("coredns-mcs memory: %w", err)
	}
	if res.burst, err = b.burst(ctx); err != nil {
		return fmt.Errorf("burst: %w", err)
	}
	if res.rssBurst, err = procs.controllerRSS(); err != nil {
		return fmt.Errorf("controller memory: %w", err)
	}
	if res.restart, err = b.restart(ctx); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	if n := w.opts.orderServices; n > 0 && !w.opts.headless {
		if res.order, err = b.orderCost(ctx, n); err != nil {
			return fmt.Errorf("order: %w", err)
		}
	}
	if w.opts.ceilingServices == 0 {
		return nil
	}
	// Last: the controller, idle, writes only Leases meanwhile.
	if res.ceiling, err = w.ceiling(ctx); err != nil {
		return fmt.Errorf("ceiling: %w", err)
	}
	return nil
}
