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
// limited to the benchmark's namespace, and coredns-mcs for member2.
type processes struct {
	opts options
	dir  string // kubeconfigs, Corefile, logs

	controller, coredns          *process.Process
	controllerArgs               []string
	httpPort, dnsPort, readyPort int
	controllerStarted            time.Time
}

// start runs the controller, waits until it is ready (every informer
// synced), then coredns-mcs, and waits until it is ready too.
func (p *processes) start(ctx context.Context, w *world) error {
	hubKubeconfig, err := p.kubeconfig("hub.kubeconfig", hubCluster)
	if err != nil {
		return err
	}
	membersKubeconfig, err := p.kubeconfig("members.kubeconfig", w.startMembers()...)
	if err != nil {
		return err
	}
	ports, err := loopback.FreePorts(3)
	if err != nil {
		return err
	}
	p.httpPort, p.dnsPort, p.readyPort = ports[0], ports[1], ports[2]
	p.controllerArgs = append([]string{
		"--kubeconfig", hubKubeconfig,
		"--clusters-kubeconfig", membersKubeconfig,
		"--watch-namespaces", w.opts.namespace,
		"--namespace", controllerNamespace, // its own: the controller exports no service of it
		"--leader-elect=false",
		"--http-address", p.hostPort(p.httpPort),
	}, p.opts.controllerArgs...)
	if err := p.startController(ctx, "controller.log"); err != nil {
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

// startController starts mcs-controller with its output in logFile, and waits
// until it is ready.
func (p *processes) startController(ctx context.Context, logFile string) error {
	var err error
	p.controller, err = process.Start(process.Config{Name: "mcs-controller", Binary: p.opts.controller, Args: p.controllerArgs, Log: filepath.Join(p.dir, logFile)})
	if err != nil {
		return err
	}
	p.controllerStarted = p.controller.Started()
	log.Printf("started mcs-controller (pid %d, log %s)", p.controller.Pid(), p.controller.Log())
	return p.controller.WaitFor(ctx, readyTimeout, process.HTTPOK(p.url("/readyz")))
}

// restartController stops mcs-controller (SIGTERM, as a rollout does) and
// starts it again with the same flags.
func (p *processes) restartController(ctx context.Context) error {
	if err := p.controller.Stop(process.StopGrace); err != nil {
		return err
	}
	return p.startController(ctx, "controller-restarted.log")
}

// controllerRSS is the controller's resident memory now, from /proc.
func (p *processes) controllerRSS() (int64, error) { return rss(p.controller.Pid()) }

// controllerHeap is the Go heap the controller has in use
// (go_memstats_heap_inuse_bytes): what it holds, where VmRSS also counts
// what the heap may grow to before the next collection.
func (p *processes) controllerHeap(ctx context.Context) (int64, error) {
	families, err := process.Scrape(ctx, p.url("/metrics"))
	if err != nil {
		return 0, err
	}
	f := families["go_memstats_heap_inuse_bytes"]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("mcs-controller's /metrics has no go_memstats_heap_inuse_bytes")
	}
	return int64(f.GetMetric()[0].GetGauge().GetValue()), nil
}

// saveHeapProfile saves the controller's heap profile as file in the
// run's directory, when it serves one (-controller-args --profiling).
func (p *processes) saveHeapProfile(ctx context.Context, file string) (string, error) {
	status, body, err := process.HTTPGet(ctx, p.url("/debug/pprof/heap"))
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("heap profile: HTTP %d", status)
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(p.dir, file)
	return path, os.WriteFile(path, []byte(body), 0o644)
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

func (p *processes) url(path string) string { return "http://" + p.hostPort(p.httpPort) + path }

func (p *processes) dnsAddr() string { return p.hostPort(p.dnsPort) }

func (p *processes) metricsURL() string { return p.url("/metrics") }

// controllerGone reports whether the controller is not running.
func (p *processes) controllerGone() bool { return p.controller == nil || p.controller.Alive() != nil }

// controllerErrors are the error lines of the controller's log so far
// (klog's "E" lines).
func (p *processes) controllerErrors() []string {
	if p.controller == nil {
		return nil
	}
	var out []string
	for line := range strings.Lines(p.controller.Output()) {
		if strings.HasPrefix(line, "E") || strings.Contains(line, "panic:") {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func (p *processes) stopCoreDNS() {
	if p.coredns != nil {
		logErr(p.coredns.Stop(process.StopGrace))
	}
}

// stopAll stops whatever is still running; stopping twice is harmless.
func (p *processes) stopAll() {
	var errs []error
	for _, proc := range []*process.Process{p.coredns, p.controller} {
		if proc != nil {
			errs = append(errs, proc.Stop(process.StopGrace))
		}
	}
	logErr(errors.Join(errs...))
}

func logErr(err error) {
	if err != nil {
		log.Print(err)
	}
}
