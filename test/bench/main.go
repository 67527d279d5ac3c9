// Command bench runs the DNS benchmarks (README.md, Performance) side by side on one machine:
// bin/coredns-mcs answering through the mcs plugin against the same binary
// answering through the kubernetes plugin, on the same objects in one lab
// cluster. It prints a markdown table of ratios and writes it to
// _output/bench/results.md. See test/bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
	"github.com/coredns-mcs/coredns-mcs/test/bench/benchreport"
)

// options are the command line.
type options struct {
	kubeconfig string
	context    string
	coredns    string
	namespace  string
	outDir     string

	services  int
	native    int // services that also have a Service here, of the same name
	plain     int // Services without an import: ordinary names
	clusters  int
	endpoints int
	workers   int
	compare   int // svc-<i> whose names the answer comparison asks

	duration    time.Duration // one dnsperf run
	rounds      int           // runs per side and comparison, order alternating
	failovers   int           // LocalFirst switches measured
	clients     int           // dnsperf -c
	outstanding int           // dnsperf -q
	load        float64       // fixed-rate runs: fraction of the slower side's QPS
	fixedRuns   int           // fixed-rate runs per side, order alternating
	fixedLength time.Duration // one fixed-rate run
	settle      time.Duration // between ready and the RSS samples

	goBench bool
	keep    bool
	only    string // "": every part; partMemory: the objects and the memory comparison
	timeout time.Duration
}

// partMemory is the -only value that runs the memory comparison alone: a
// minute against the lab instead of ten, and no query load on it.
const partMemory = "memory"

func parseFlags() (options, error) {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "_output/lab/kubeconfig", "kubeconfig of the lab")
	flag.StringVar(&o.context, "context", "member3", "context (cluster) that holds the benchmark objects")
	flag.StringVar(&o.coredns, "coredns", "bin/coredns-mcs", "the coredns-mcs binary")
	flag.StringVar(&o.namespace, "namespace", "mcs-bench", "namespace of the benchmark objects")
	flag.StringVar(&o.outDir, "out", "_output/bench", "directory for results.md, Corefiles, logs and query files")
	flag.IntVar(&o.services, "services", 10000, "imported services")
	flag.IntVar(&o.native, "native", 2000, "imported services that also have a ClusterIP Service in the cluster (lowered to -services)")
	flag.IntVar(&o.plain, "plain", 1000, "Services without an import, whose names mcs passes on")
	flag.IntVar(&o.clusters, "clusters", 3, "source clusters per service")
	flag.IntVar(&o.endpoints, "endpoints", 10, "endpoints per source cluster")
	flag.IntVar(&o.workers, "workers", 32, "concurrent API writes")
	flag.IntVar(&o.compare, "compare", 1000, "imported services svc-<i> whose names the answer comparison asks (every other object's, all)")
	flag.DurationVar(&o.duration, "duration", 8*time.Second, "length of one dnsperf run")
	flag.IntVar(&o.rounds, "rounds", 3, "dnsperf runs per side and comparison, in alternating order")
	flag.IntVar(&o.failovers, "failovers", 20, "LocalFirst failovers (and back) measured")
	flag.IntVar(&o.clients, "clients", 1, "dnsperf clients (-c)")
	flag.IntVar(&o.outstanding, "outstanding", 100, "dnsperf outstanding queries (-q)")
	flag.Float64Var(&o.load, "load", 0.5, "fixed-rate runs offer this fraction of the slower side's QPS")
	flag.IntVar(&o.fixedRuns, "fixed-runs", 12, "fixed-rate dnsperf runs per side and comparison, in alternating order")
	flag.DurationVar(&o.fixedLength, "fixed-duration", 2*time.Second, "length of one fixed-rate dnsperf run")
	flag.DurationVar(&o.settle, "settle", 20*time.Second, "wait between ready and the RSS samples")
	flag.BoolVar(&o.goBench, "gobench", true, "run the plugin's Go benchmarks too")
	flag.BoolVar(&o.keep, "keep", false, "keep the objects at the end (a rerun then skips writing them)")
	flag.StringVar(&o.only, "only", "", "run one part: "+partMemory+" (the objects, the RSS comparison and the answer comparison, no query load)")
	flag.DurationVar(&o.timeout, "timeout", 20*time.Minute, "bound on the whole run")
	if err := benchreport.ParseFlags(); err != nil {
		return o, err
	}
	return o, o.validate()
}

func (o *options) validate() error {
	switch {
	case o.native < 1 || o.plain < 1 || o.compare < 1:
		return errors.New("-native, -plain and -compare must be positive")
	case o.services < 1 || o.clusters < 1 || o.endpoints < 1 || o.workers < 1 || o.rounds < 1 || o.fixedRuns < 1 || o.clients < 1 || o.outstanding < 1 || o.failovers < 1:
		return errors.New("-services, -clusters, -endpoints, -workers, -rounds, -fixed-runs, -failovers, -clients and -outstanding must be positive")
	case o.services*o.endpoints > benchfixture.MaxEndpointsPerCluster:
		return fmt.Errorf("-services × -endpoints must be at most %d (one address block per cluster)", benchfixture.MaxEndpointsPerCluster)
	case o.services > benchfixture.EndpointIPBase-benchfixture.ClustersetIPBase:
		return fmt.Errorf("-services must be at most %d (the clusterset IP block)", benchfixture.EndpointIPBase-benchfixture.ClustersetIPBase)
	case o.clusters > benchfixture.MaxClusters:
		return fmt.Errorf("-clusters must be at most %d", benchfixture.MaxClusters)
	case o.load <= 0 || o.load > 1:
		return errors.New("-load must be in (0, 1]")
	case o.duration < time.Second || o.fixedLength < time.Second:
		return errors.New("-duration and -fixed-duration must be at least 1s")
	case o.only != "" && o.only != partMemory:
		return fmt.Errorf("-only must be %s, not %q", partMemory, o.only)
	}
	o.native = min(o.native, o.services)
	return benchreport.Abs(&o.kubeconfig, &o.coredns)
}

func main() { benchreport.Main("bench", benchreport.SecondSignalIgnored, parseFlags, run) }

// run does every phase, within -timeout; whatever happens, the CoreDNS
// processes it started are stopped and, unless -keep, the namespace is
// deleted. The Go benchmarks run last, on a machine the other phases have
// left quiet.
func run(ctx context.Context, o options) (err error) {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	res := &results{opts: o, Run: benchreport.Start()}
	if err := os.MkdirAll(o.outDir, 0o755); err != nil {
		return err
	}
	w, err := newWorld(o)
	if err != nil {
		return err
	}
	defer func() {
		if !o.keep {
			err = errors.Join(err, w.deleteNamespace())
		}
	}()
	if res.objects, err = w.ensure(ctx); err != nil {
		return err
	}
	servers := &fleet{opts: o}
	defer servers.stopAll()
	if err := measure(ctx, o, w, servers, res); err != nil {
		return err
	}
	servers.stopAll()
	if o.goBench && o.only == "" {
		log.Print("running the plugin's Go benchmarks")
		if res.goBench, err = runGoBench(ctx); err != nil {
			return err
		}
	}
	return res.Finish(os.Stdout, filepath.Join(o.outDir, "results.md"), res.markdown)
}

// measure runs the memory comparison first, on fresh processes that have
// answered nothing yet, and the answer comparison of the labels selector;
// then the query contests.
func measure(ctx context.Context, o options, w *world, servers *fleet, res *results) error {
	var err error
	if res.shipped, err = readShipped("."); err != nil {
		return err
	}
	corefiles, err := memberCorefiles(".")
	if err != nil {
		return err
	}
	var procs map[string]*server
	if res.memory, procs, err = compareMemory(ctx, o, servers, memoryGroups(corefiles)); err != nil {
		return err
	}
	if res.answers, err = compareAnswers(ctx, o, w, procs[procMemberAll], procs[procMember], procs[procStock]); err != nil {
		return err
	}
	for _, name := range []string{procMCSOnly, procMemberAll} {
		if err := servers.remove(procs[name]); err != nil {
			return err
		}
		delete(procs, name)
	}
	if o.only == partMemory {
		return nil
	}
	return runContests(ctx, o, w, servers, procs, res)
}

// runContests starts the contests' other processes beside procs, checks
// every answer, then runs the contests and the failovers.
func runContests(ctx context.Context, o options, w *world, servers *fleet, procs map[string]*server, res *results) error {
	var err error
	if servers.glue, err = glueAddr(); err != nil {
		return err
	}
	if err := startContestants(ctx, servers, procs); err != nil {
		return err
	}
	res.dns = contests(w, procs, []net.IP{servers.glue})
	for _, c := range res.dns {
		if err := verify(ctx, o, c); err != nil {
			return err
		}
	}
	for _, c := range res.dns {
		if err := c.run(ctx, o); err != nil {
			return err
		}
	}
	if res.failover, err = measureFailovers(ctx, o, w, procs[procMember]); err != nil {
		return err
	}
	res.afterLoad = memoryResult{}
	return sampleMemory(ctx, o, []*server{procs[procMember], procs[procStock]}, res.afterLoad)
}

// startContestants starts, into procs, the processes of the contests that
// the memory comparison did not.
func startContestants(ctx context.Context, servers *fleet, procs map[string]*server) error {
	for _, p := range []memProc{
		{"mcs", corefileMCSAndKubernetes},
		{"kubernetes-alone", corefileKubernetesAlone},
		{"whoami", corefileWhoami},
	} {
		var err error
		if procs[p.name], err = servers.start(ctx, p.name, p.corefile); err != nil {
			return err
		}
	}
	return nil
}

// contests are the query contests of test/bench/README.md, in order; glue
// is what ns.dns.clusterset.local answers on the mcs process.
func contests(w *world, procs map[string]*server, glue []net.IP) []*contest {
	mcs := procs["mcs"]
	native := side{"native A", mcs, nativeNames, answersA(benchfixture.ImportIP)}
	return []*contest{
		{name: "native A (cluster.local), mcs vs kubernetes", minQPS: 1, maxP99: 1,
			sides: [2]side{{"mcs", mcs, nativeNames, answersA(benchfixture.ImportIP)}, {"kubernetes", procs[procKubernetes], nativeNames, answersA(w.serviceIP)}}},
		{name: "clusterset A (clusterset.local), mcs vs kubernetes multicluster", minQPS: 1, maxP99: 1,
			sides: [2]side{{"mcs", mcs, clustersetNames, answersA(benchfixture.ImportIP)}, {"kubernetes", procs[procKubernetes], clustersetNames, answersA(benchfixture.ImportIP)}}},
		{name: "plain A (passed on), mcs + kubernetes vs kubernetes alone", minQPS: passThroughRatio, maxP99: 1 / passThroughRatio,
			sides: [2]side{{"mcs + kubernetes", mcs, plainNames, answersA(w.plainIP)}, {"kubernetes alone", procs["kubernetes-alone"], plainNames, answersA(w.plainIP)}}},
		{name: "native A (cluster.local), mcs vs the whoami ceiling", minQPS: ceilingRatio,
			sides: [2]side{{"mcs", mcs, nativeNames, answersA(benchfixture.ImportIP)}, {"whoami", procs["whoami"], nativeNames, answersNOERROR}}},
		{name: "NS clusterset.local vs native A, one mcs process", minQPS: nsRatio,
			sides: [2]side{{"NS clusterset.local", mcs, nsApex, answersNS(glue)}, native}},
		{name: "A ns.dns.clusterset.local vs native A, one mcs process", minQPS: nsRatio,
			sides: [2]side{{"A ns.dns.clusterset.local", mcs, nsServer, answersGlue(glue)}, native}},
		{name: "plain A, member Corefile vs stock kubeadm Corefile", minQPS: passThroughRatio, maxP99: 1 / passThroughRatio,
			sides: [2]side{{"member Corefile", procs[procMember], plainNames, answersA(w.plainIP)}, {"stock kubeadm", procs[procStock], plainNames, answersA(w.plainIP)}}},
	}
}

// Targets that are not "as good as kubernetes" (README.md, Performance):
// names mcs passes on keep 97% of the kubernetes plugin's speed, native
// names reach 95% of what the server answers without any lookup, NS
// queries 90% of a native A's, mcs holds the objects in a fifth of the
// kubernetes plugin's memory, and the shipped member Corefile's CoreDNS
// holds a fleet in at most 1.1 times what stock kubeadm CoreDNS does.
const (
	passThroughRatio = 0.97
	ceilingRatio     = 0.95
	nsRatio          = 0.9
	maxFailoverP99   = 100 * time.Millisecond
	maxRSSRatio      = 0.2
	maxMemberRatio   = 1.1
)
