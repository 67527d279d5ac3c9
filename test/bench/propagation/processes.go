package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// readyTimeout bounds the start of one process, its informers' sync
// included.
const readyTimeout = 2 * time.Minute

// processes are the binaries this run starts: mcs-controller on the hub,
// limited to the benchmark's namespace (one replica per shard with
// -shards), and coredns-mcs for member2.
type processes struct {
	opts options
	dir  string // kubeconfigs, Corefile, logs

	controllers        []*process.Process // one per replica
	coredns            *process.Process
	controllerArgs     []string // every replica's but --http-address
	httpPorts          []int    // one per replica
	dnsPort, readyPort int
	controllerStarted  time.Time
}

// start runs the controller's replicas, waits until they are ready (every
// informer synced), then coredns-mcs, and waits until it is ready too.
func (p *processes) start(ctx context.Context, w *world) error {
	hubKubeconfig, err := p.kubeconfig("hub.kubeconfig", hubCluster)
	if err != nil {
		return err
	}
	membersKubeconfig, err := p.kubeconfig("members.kubeconfig", w.startMembers()...)
	if err != nil {
		return err
	}
	ports, err := loopback.FreePorts(2 + p.opts.shards)
	if err != nil {
		return err
	}
	p.dnsPort, p.readyPort, p.httpPorts = ports[0], ports[1], ports[2:]
	p.controllerArgs = append([]string{
		"--kubeconfig", hubKubeconfig,
		"--clusters-kubeconfig", membersKubeconfig,
		"--watch-namespaces", w.opts.namespace,
		"--namespace", controllerNamespace, // its own: the controller exports no service of it
	}, p.electionArgs()...)
	p.controllerArgs = append(p.controllerArgs, p.opts.controllerArgs...)
	if err := p.startControllers(ctx, ""); err != nil {
		return err
	}
	corefile := filepath.Join(p.dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(p.corefile()), 0o644); err != nil {
		return err
	}
	p.coredns, err = process.Start(process.CoreDNS("coredns-mcs", p.opts.coredns, corefile, filepath.Join(p.dir, "coredns.log")))
	if err != nil {
		return err
	}
	log.Printf("started coredns-mcs for %s (pid %d, dns %s, log %s)", consumerCluster, p.coredns.Pid(), p.dnsAddr(), p.coredns.Log())
	return p.coredns.WaitFor(ctx, readyTimeout, process.CoreDNSReady(p.dnsAddr(), fmt.Sprintf("http://%s/ready", p.hostPort(p.readyPort))))
}

// electionArgs: one replica needs no Lease; with -shards, each replica
// campaigns for the shards' Leases as deploy/components/shards runs them.
func (p *processes) electionArgs() []string {
	if p.opts.shards == 1 {
		return []string{"--leader-elect=false"}
	}
	return []string{"--shards", strconv.Itoa(p.opts.shards)}
}

// startControllers starts every replica of mcs-controller together, as a
// Deployment's rollout does, with their output in controller[-i]<suffix>.log,
// and waits until each is ready.
func (p *processes) startControllers(ctx context.Context, suffix string) error {
	p.controllers = nil // those stopped before
	for i, port := range p.httpPorts {
		args := append(slices.Clone(p.controllerArgs), "--http-address", p.hostPort(port))
		c, err := process.Start(process.Config{Name: p.replicaName(i), Binary: p.opts.controller, Args: args, Log: filepath.Join(p.dir, p.replicaName(i)+suffix+".log")})
		if err != nil {
			return err
		}
		p.controllers = append(p.controllers, c)
		log.Printf("started %s (pid %d, log %s)", p.replicaName(i), c.Pid(), c.Log())
	}
	p.controllerStarted = p.controllers[0].Started()
	for i, c := range p.controllers {
		if err := c.WaitFor(ctx, readyTimeout, process.HTTPOK(p.url(i, "/readyz"))); err != nil {
			return err
		}
	}
	return nil
}

// replicaName is "controller", or "controller-<i>" with -shards.
func (p *processes) replicaName(i int) string {
	if p.opts.shards == 1 {
		return "controller"
	}
	return fmt.Sprintf("controller-%d", i)
}

// restartControllers stops every replica of mcs-controller (SIGTERM, as a
// rollout does) and starts them again with the same flags.
func (p *processes) restartControllers(ctx context.Context) error {
	if err := p.stopControllers(); err != nil {
		return err
	}
	return p.startControllers(ctx, "-restarted")
}

func (p *processes) stopControllers() error {
	var errs []error
	for _, c := range p.controllers {
		errs = append(errs, c.Stop(process.StopGrace))
	}
	return errors.Join(errs...)
}

// controllerRSS is each replica's resident memory now, from /proc.
func (p *processes) controllerRSS() ([]int64, error) {
	out := make([]int64, len(p.controllers))
	for i, c := range p.controllers {
		var err error
		if out[i], err = rss(c.Pid()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// controllerHeap is the Go heap each replica has in use
// (go_memstats_heap_inuse_bytes): what it holds, where VmRSS also counts
// what the heap may grow to before the next collection.
func (p *processes) controllerHeap(ctx context.Context) ([]int64, error) {
	out := make([]int64, len(p.controllers))
	for i := range p.controllers {
		families, err := process.Scrape(ctx, p.url(i, "/metrics"))
		if err != nil {
			return nil, err
		}
		f := families["go_memstats_heap_inuse_bytes"]
		if f == nil || len(f.GetMetric()) == 0 {
			return nil, fmt.Errorf("%s's /metrics has no go_memstats_heap_inuse_bytes", p.replicaName(i))
		}
		out[i] = int64(f.GetMetric()[0].GetGauge().GetValue())
	}
	return out, nil
}

// saveHeapProfiles saves each replica's heap profile as
// <replica>-heap.pprof in the run's directory, when it serves one
// (-controller-args --profiling).
func (p *processes) saveHeapProfiles(ctx context.Context) ([]string, error) {
	var paths []string
	for i := range p.controllers {
		status, body, err := process.HTTPGet(ctx, p.url(i, "/debug/pprof/heap"))
		if err == nil && status != http.StatusOK {
			err = fmt.Errorf("heap profile: HTTP %d", status)
		}
		if err != nil {
			return nil, err
		}
		path := filepath.Join(p.dir, p.replicaName(i)+"-heap.pprof")
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			return nil, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// corednsRSS is coredns-mcs's.
func (p *processes) corednsRSS() (int64, error) { return rss(p.coredns.Pid()) }

func rss(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", pid)
}

// kubeconfig writes a copy of the lab's kubeconfig with only the contexts
// given, the first one current.
func (p *processes) kubeconfig(file string, contexts ...string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(p.opts.kubeconfig)
	if err != nil {
		return "", err
	}
	for name := range cfg.Contexts {
		if !slices.Contains(contexts, name) {
			delete(cfg.Contexts, name)
		}
	}
	for _, c := range contexts {
		if cfg.Contexts[c] == nil {
			return "", fmt.Errorf("%s has no context %s", p.opts.kubeconfig, c)
		}
	}
	cfg.CurrentContext = contexts[0]
	path := filepath.Join(p.dir, file)
	return path, clientcmd.WriteToFile(*cfg, path)
}

// corefile is member2's stanza with answer endpoints, so that a changed
// endpoint changes the answer, and no cache, so that every query reaches
// the plugin.
func (p *processes) corefile() string {
	return fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    ready %s
    mcs cluster.local clusterset.local {
        kubeconfig %s %s
        cluster %s
        answer endpoints
    }
    kubernetes cluster.local {
        kubeconfig %s %s
    }
}
`, p.dnsPort, p.hostPort(p.readyPort), p.opts.kubeconfig, consumerCluster, consumerCluster, p.opts.kubeconfig, consumerCluster)
}

func (p *processes) hostPort(port int) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// url is replica i's.
func (p *processes) url(i int, path string) string {
	return "http://" + p.hostPort(p.httpPorts[i]) + path
}

func (p *processes) dnsAddr() string { return p.hostPort(p.dnsPort) }

func (p *processes) metricsURLs() []string {
	var out []string
	for i := range p.httpPorts {
		out = append(out, p.url(i, "/metrics"))
	}
	return out
}

// controllerGone reports whether no replica of the controller is running.
func (p *processes) controllerGone() bool {
	return !slices.ContainsFunc(p.controllers, func(c *process.Process) bool { return c.Alive() == nil })
}

// controllerErrors are the error lines of the replicas' logs so far
// (klog's "E" lines), each after its replica's name when there are more.
func (p *processes) controllerErrors() []string {
	var out []string
	for i, c := range p.controllers {
		for line := range strings.Lines(c.Output()) {
			if strings.HasPrefix(line, "E") || strings.Contains(line, "panic:") {
				out = append(out, p.errorPrefix(i)+strings.TrimSpace(line))
			}
		}
	}
	return out
}

func (p *processes) errorPrefix(i int) string {
	if len(p.controllers) == 1 {
		return ""
	}
	return p.replicaName(i) + ": "
}

func (p *processes) stopCoreDNS() {
	if p.coredns != nil {
		logErr(p.coredns.Stop(process.StopGrace))
	}
}

// stopAll stops whatever is still running; stopping twice is harmless.
func (p *processes) stopAll() {
	var err error
	if p.coredns != nil {
		err = p.coredns.Stop(process.StopGrace)
	}
	logErr(errors.Join(err, p.stopControllers()))
}

func logErr(err error) {
	if err != nil {
		log.Print(err)
	}
}
