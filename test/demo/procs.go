package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// The processes make demo leaves running: mcs-controller and a coredns-mcs
// per member, their logs in _output/demo/logs and their pid files in
// _output/demo/run, which the next run and labctl down (make lab-down)
// stop.

// readyTimeout bounds each process's start-up: informers of four API
// servers syncing on a busy machine take seconds.
const readyTimeout = 90 * time.Second

// coredns is how to reach one member's coredns-mcs.
type coredns struct {
	dns, ready, metrics string // host:port
	log                 string
}

func (s *story) logPath(name string) string { return filepath.Join(s.dir, "logs", name+".log") }
func (s *story) pidPath(name string) string { return filepath.Join(s.dir, "run", name+".pid") }

func corednsName(member string) string { return "coredns-mcs-" + member }

// endpointsDNS is the second coredns-mcs of member2, answering endpoints,
// which the step on LocalFirst's failover order asks.
const endpointsDNS = "coredns-mcs-member2-endpoints"

// processNames are the demo's processes, as named in their log and pid files.
func processNames() []string {
	names := []string{"mcs-controller", endpointsDNS}
	for _, m := range members {
		names = append(names, corednsName(m))
	}
	return names
}

// stopPrevious stops what the previous run left running.
func (s *story) stopPrevious() error {
	for _, name := range processNames() {
		if err := process.StopPIDFile(s.pidPath(name), process.StopGrace); err != nil {
			return err
		}
	}
	for _, d := range []string{"logs", "run"} {
		if err := os.MkdirAll(filepath.Join(s.dir, d), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// startDetached starts cfg in a session of its own and records it, so that
// it outlives the demo and make lab-down stops it.
func (s *story) startDetached(name string, cfg process.Config) (*process.Process, error) {
	cfg.Name, cfg.Log, cfg.Detach = name, s.logPath(name), true
	p, err := process.Start(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.WritePIDFile(s.pidPath(name)); err != nil {
		_ = p.Stop(process.StopGrace)
		return nil, err
	}
	return p, nil
}

// startController runs bin/mcs-controller against the hub with the members
// as --clusters-kubeconfig, limited to namespace demo so that it leaves the
// lab tests' namespaces alone, with member Secrets looked for in demo too.
// One replica needs no leader election.
func (s *story) startController(ctx context.Context) error {
	hubKubeconfig := filepath.Join(s.dir, "hub.kubeconfig")
	membersKubeconfig := filepath.Join(s.dir, "members.kubeconfig")
	if err := writeKubeconfig(s.kubeconfig, hubKubeconfig, hub); err != nil {
		return err
	}
	if err := writeKubeconfig(s.kubeconfig, membersKubeconfig, members...); err != nil {
		return err
	}
	ports, err := loopback.FreePorts(1)
	if err != nil {
		return err
	}
	s.controllerHTTP = fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := []string{
		"--kubeconfig", hubKubeconfig, "--clusters-kubeconfig", membersKubeconfig,
		"--watch-namespaces", namespace, "--namespace", "mcs-system",
		// member2 gets namespace demo from the controller, as the story says.
		"--create-namespaces",
		"--leader-elect=false", "--http-address", s.controllerHTTP,
	}
	bin := filepath.Join(s.root, "bin", "mcs-controller")
	fmt.Fprintf(s.w, "$ %s\n", s.line(append([]string{bin}, args...)...))
	p, err := s.startDetached("mcs-controller", process.Config{Binary: bin, Args: args})
	if err != nil {
		return err
	}
	if err := p.WaitFor(ctx, readyTimeout, process.HTTPOK("http://"+s.controllerHTTP+"/readyz")); err != nil {
		return err
	}
	fmt.Fprintf(s.w, "mcs-controller ready: pid %d, /readyz and /metrics on http://%s, log %s\n", p.Pid(), s.controllerHTTP, s.rel(p.Log()))
	return nil
}

// startCoreDNS runs bin/coredns-mcs name for member with
// corefile/lab.Corefile, answering answer (vip or endpoints), on free
// loopback ports.
func (s *story) startCoreDNS(ctx context.Context, name, member, answer string) (coredns, error) {
	var c coredns
	var env []string
	bin, corefile := filepath.Join(s.root, "bin", "coredns-mcs"), filepath.Join(s.root, "corefile", "lab.Corefile")
	p, _, err := process.StartCoreDNSOnFreePorts(ctx, 3, readyTimeout, func(ports []int) (process.Config, string, error) {
		c = coredns{
			dns:     fmt.Sprintf("127.0.0.1:%d", ports[0]),
			ready:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
			metrics: fmt.Sprintf("127.0.0.1:%d", ports[2]),
			log:     s.logPath(name),
		}
		env = []string{
			"MCS_KUBECONFIG=" + s.kubeconfig, "MCS_CONTEXT=" + member, "MCS_CLUSTER=" + member,
			fmt.Sprintf("MCS_DNS_PORT=%d", ports[0]), fmt.Sprintf("MCS_READY_PORT=%d", ports[1]), fmt.Sprintf("MCS_METRICS_PORT=%d", ports[2]),
			"MCS_ANSWER=" + answer,
		}
		cfg := process.CoreDNS(name, bin, corefile, c.log, env...)
		cfg.Detach = true
		return cfg, c.dns, nil
	})
	if err != nil {
		return coredns{}, err
	}
	if err := p.WritePIDFile(s.pidPath(name)); err != nil {
		_ = p.Stop(process.StopGrace)
		return coredns{}, err
	}
	fmt.Fprintf(s.w, "$ %s\n", s.line(append(env, bin, "-conf", corefile)...))
	if err := p.WaitFor(ctx, readyTimeout, process.CoreDNSReady(c.dns, "http://"+c.ready+"/ready")); err != nil {
		return coredns{}, err
	}
	fmt.Fprintf(s.w, "coredns-mcs for %s (answer %s) ready: pid %d, DNS on %s, log %s\n", member, answer, p.Pid(), c.dns, s.rel(c.log))
	return c, nil
}
