//go:build lab

package e2e

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// block is one server block of a generated Corefile, on a port of its own.
// Every block has the kubernetes plugin for cluster.local; mcs blocks put
// mcs cluster.local clusterset.local above it.
type block struct {
	mcs     bool
	options []string // more lines of the mcs stanza
	kube    []string // lines of the kubernetes block
	ttl     uint32   // mcs's TTL; written as the ttl option unless it is the default 5
	reverse bool     // the block, mcs and kubernetes answer in-addr.arpa and ip6.arpa too
}

// config is what one coredns-mcs process runs.
type config struct {
	blocks []block
	// kubeconfig is the file mcs connects with; "" is the lab's. The
	// kubernetes plugin always uses the lab's.
	kubeconfig string
	// context is the lab cluster both plugins answer for, and cluster the
	// name mcs knows it by: member1 and self unless set. fromProperty
	// leaves the cluster option out: the ClusterProperty names the cluster.
	context, cluster string
	fromProperty     bool
	// file is a Corefile of corefile/ run as it is, its ports, cluster and
	// kubeconfig given by its $MCS_* variables; blocks then describes its
	// one server block, and kubeconfig is unused.
	file string
	// binary runs in place of bin/coredns-mcs: another version's
	// (skew_test.go).
	binary string
}

// The blocks of the process most tests run.
var (
	vipBlock        = block{mcs: true, ttl: 5}
	endpointsBlock  = block{mcs: true, options: []string{"answer endpoints"}, ttl: 600}
	localFirstBlock = block{mcs: true, options: []string{"strategy LocalFirst"}, ttl: 30}
	// kubernetesBlock has no mcs: stock CoreDNS, for comparisons.
	kubernetesBlock = block{ttl: 5}
)

// servers are the blocks of the usual process, by job.
type servers struct {
	proc *coredns
	// vip is mcs with its defaults; endpoints answers endpoints with ttl 600;
	// localFirst applies LocalFirst to every import with ttl 30;
	// kubernetes has no mcs.
	vip, endpoints, localFirst, kubernetes *server
}

// startServers runs the usual process and waits until it is ready.
func startServers(t *testing.T) *servers {
	t.Helper()
	p := startCoreDNS(t, config{blocks: []block{vipBlock, endpointsBlock, localFirstBlock, kubernetesBlock}})
	p.waitReady(t, 20*time.Second)
	return &servers{proc: p, vip: p.servers[0], endpoints: p.servers[1], localFirst: p.servers[2], kubernetes: p.servers[3]}
}

// coredns is a running bin/coredns-mcs.
type coredns struct {
	*process.Process
	corefile   string // its text
	readyURL   string
	metricsURL string
	servers    []*server // one per block, in order
}

// startTimeout bounds the wait until coredns serves DNS: in each server
// block, start-up waits up to 5 s for mcs's informers and 5 s for the
// kubernetes plugin's, one after the other, so a slow API server (one that
// holds a benchmark's thousands of Services) costs two blocks 20 s.
const startTimeout = 45 * time.Second

// startCoreDNS starts bin/coredns-mcs with a Corefile generated from cfg on
// free loopback ports and waits until it serves DNS. It is stopped when the
// test ends; its output is logged when the test failed, and a panic in it
// fails the test.
func startCoreDNS(t *testing.T, cfg config) *coredns {
	t.Helper()
	bin := cfg.binary
	if bin == "" {
		bin = binary(t)
	}
	c := &coredns{}
	proc, _, err := process.StartCoreDNSOnFreePorts(t.Context(), len(cfg.blocks)+2, startTimeout, func(ports []int) (process.Config, string, error) {
		c = &coredns{
			readyURL:   fmt.Sprintf("http://127.0.0.1:%d/ready", ports[0]),
			metricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1]),
		}
		for i, b := range cfg.blocks {
			c.servers = append(c.servers, &server{addr: fmt.Sprintf("127.0.0.1:%d", ports[i+2]), ttl: b.ttl})
		}
		dir := t.TempDir()
		corefile := filepath.Join(dir, "Corefile")
		text, env, err := cfg.write(corefile, labtest.Get(t).Kubeconfig(), ports)
		c.corefile = text
		return process.CoreDNS("coredns", bin, corefile, filepath.Join(dir, "coredns.log"), env...), c.servers[0].addr, err
	})
	if err != nil {
		if proc != nil {
			err = fmt.Errorf("%w\noutput:\n%s", err, proc.Output())
		}
		t.Fatalf("%v\nCorefile:\n%s", err, c.corefile)
	}
	c.Process = proc
	c.StopAtCleanup(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("coredns Corefile:\n%s", c.corefile)
		}
	})
	return c
}

// write puts the Corefile at path and returns its text and the environment
// it needs: a generated one, or cfg.file with its variables set.
func (cfg config) write(path, labKubeconfig string, ports []int) (string, []string, error) {
	if cfg.file == "" {
		text := cfg.render(labKubeconfig, ports)
		return text, nil, os.WriteFile(path, []byte(text), 0o644)
	}
	b, err := os.ReadFile(cfg.file)
	if err != nil {
		return "", nil, err
	}
	env := []string{
		"MCS_KUBECONFIG=" + labKubeconfig, "MCS_CONTEXT=" + labtest.Member1, "MCS_CLUSTER=" + self,
		fmt.Sprintf("MCS_READY_PORT=%d", ports[0]), fmt.Sprintf("MCS_METRICS_PORT=%d", ports[1]),
		fmt.Sprintf("MCS_DNS_PORT=%d", ports[2]), "MCS_ANSWER=vip",
	}
	return string(b), env, os.WriteFile(path, b, 0o644)
}

// render generates the Corefile: ports[0] is ready's, ports[1] prometheus's,
// then one per block.
func (cfg config) render(labKubeconfig string, ports []int) string {
	mcsKubeconfig := cmp.Or(cfg.kubeconfig, labKubeconfig)
	context, cluster := cmp.Or(cfg.context, labtest.Member1), cmp.Or(cfg.cluster, self)
	var b strings.Builder
	for i, blk := range cfg.blocks {
		port := ports[i+2]
		keys, mcsZones, kubeZones := fmt.Sprintf("cluster.local:%d", port), "cluster.local clusterset.local", "cluster.local"
		if blk.mcs {
			keys += fmt.Sprintf(" clusterset.local:%d", port)
		}
		if blk.reverse {
			keys += fmt.Sprintf(" in-addr.arpa:%d ip6.arpa:%d", port, port)
			mcsZones, kubeZones = mcsZones+" in-addr.arpa ip6.arpa", kubeZones+" in-addr.arpa ip6.arpa"
		}
		fmt.Fprintf(&b, "%s {\n    bind 127.0.0.1\n    errors\n", keys)
		fmt.Fprintf(&b, "    ready 127.0.0.1:%d\n    prometheus 127.0.0.1:%d\n", ports[0], ports[1])
		if blk.mcs {
			fmt.Fprintf(&b, "    mcs %s {\n        kubeconfig %s %s\n", mcsZones, mcsKubeconfig, context)
			if !cfg.fromProperty {
				fmt.Fprintf(&b, "        cluster %s\n", cluster)
			}
			for _, o := range blk.options {
				fmt.Fprintf(&b, "        %s\n", o)
			}
			if blk.ttl != 5 {
				fmt.Fprintf(&b, "        ttl %d\n", blk.ttl)
			}
			b.WriteString("    }\n")
		}
		fmt.Fprintf(&b, "    kubernetes %s {\n        kubeconfig %s %s\n", kubeZones, labKubeconfig, context)
		for _, o := range blk.kube {
			fmt.Fprintf(&b, "        %s\n", o)
		}
		b.WriteString("    }\n}\n")
	}
	return b.String()
}

// waitReady waits until /ready says 200.
func (p *coredns) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	if err := p.WaitFor(t.Context(), timeout, process.HTTPOK(p.readyURL)); err != nil {
		t.Fatalf("coredns is not ready: %v", err)
	}
}

// alive fails the test when the process has exited.
func (p *coredns) alive(t *testing.T) {
	t.Helper()
	if err := p.Alive(); err != nil {
		t.Fatal(err)
	}
}

// binary is bin/coredns-mcs, which must be built from the current sources.
func binary(t *testing.T) string {
	t.Helper()
	return built(t, "coredns-mcs", "plugin/mcs", "api", "cmd/coredns-mcs")
}

// built is bin/<name>, failing the test when a Go file of one of the
// source directories is newer: run make build.
func built(t *testing.T, name string, sources ...string) string {
	t.Helper()
	root := labtest.Get(t).Root()
	bin := filepath.Join(root, "bin", name)
	info, err := os.Stat(bin)
	if err != nil {
		t.Fatalf("%v: run make build first", err)
	}
	for _, dir := range sources {
		if newer := newerSource(filepath.Join(root, dir), info.ModTime()); newer != "" {
			t.Fatalf("%s is older than %s: run make build", bin, newer)
		}
	}
	return bin
}

// newerSource names a non-test Go file of dir changed after t, if any.
func newerSource(dir string, t time.Time) string {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().After(t) {
			return filepath.Join(dir, name)
		}
	}
	return ""
}
