//go:build lab

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// TestAPIOutage: coredns-mcs starts while member1's API server cannot be
// reached, serves once it can, and keeps answering from what it knows when
// it goes away again; api_status says which, and ordinary names keep the
// answers of the kubernetes plugin (which reaches the API) throughout. The
// API server sits behind a proxy the test switches.
func TestAPIOutage(t *testing.T) {
	f := newFixture(t)
	f.apply(
		f.serviceImport("api", importSpec{strategy: remoteAndLocal, ips: []string{"10.99.0.7"}}),
		f.derivedService("api", false),
		f.importedSlice("api", member2, ep("10.12.6.1")),
	)
	qs := f.ordinary()
	proxy, kubeconfig := labtest.Get(t).APIProxy(t, labtest.Member1)
	p := startCoreDNS(t, config{blocks: []block{vipBlock, kubernetesBlock}, kubeconfig: kubeconfig})
	s, kube := p.servers[0], p.servers[1]
	apiStatus := func(status string) string { return series("coredns_mcs_api_status", "status", status) }
	native, clusterset := f.native("api"), f.clusterset("api")
	step := func(name string, fn func(t *testing.T)) {
		if !t.Run(name, fn) {
			t.FailNow()
		}
	}

	step("unreachable at start-up", func(t *testing.T) {
		p.alive(t)
		code, body, err := process.HTTPGet(t.Context(), p.readyURL)
		if err != nil || code != http.StatusServiceUnavailable || !strings.Contains(body, "mcs") {
			t.Errorf("/ready: %d %q, %v; want 503 naming mcs", code, body, err)
		}
		p.expectLog(t, "waiting for the Kubernetes API at https://"+proxy.Addr(), "connection refused")
		p.expectLog(t, "starting before the Kubernetes API at https://"+proxy.Addr()+" has synced")
		s.expect(t, native, dns.TypeA, servfail)
		s.expect(t, clusterset, dns.TypeA, servfail)
		version := "dns-version.clusterset.local."
		s.expect(t, version, dns.TypeTXT, answer([]string{rr(`%s %d IN TXT "1.0.0"`, version, s.ttl)}))
		p.expectMetric(t, series("coredns_mcs_informers_synced", "resource", "serviceimports"), 0)
		p.expectMetric(t, apiStatus("unreachable"), 1)
		expectOrdinary(t, s, kube, qs)
		m := p.scrape(t)
		for _, zone := range []string{"cluster.local.", "clusterset.local."} {
			if n := m[requests(s, zone, "none", "servfail")]; n < 1 {
				t.Errorf("%s = %v, want at least 1", requests(s, zone, "none", "servfail"), n)
			}
		}
	})

	step("serves once the API server is reachable", func(t *testing.T) {
		proxy.Up(t)
		p.waitReady(t, 30*time.Second)
		s.expect(t, native, dns.TypeA, answer(s.addrs(native, "10.99.0.7")))
		s.expect(t, clusterset, dns.TypeA, answer(s.addrs(clusterset, "10.99.0.7")))
		p.expectMetric(t, series("coredns_mcs_informers_synced", "resource", "serviceimports"), 1)
		p.expectMetric(t, apiStatus("ok"), 1)
		p.expectLog(t, "the Kubernetes API at https://"+proxy.Addr()+" answers again")
		expectOrdinary(t, s, kube, qs)
	})

	step("answers from the last known state while the API server is gone", func(t *testing.T) {
		proxy.Down()
		f.apply(f.serviceImport("api", importSpec{strategy: remoteAndLocal, ips: []string{"10.99.0.8"}}))
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
			for _, name := range []string{native, clusterset} {
				m, err := s.ask(t.Context(), name, dns.TypeA, "udp")
				if err != nil {
					t.Fatal(err)
				}
				if got, want := summarize(m), answer(s.addrs(name, "10.99.0.7")); got.String() != want.String() {
					t.Fatalf("%s during the outage:\n%s\nwant the last known\n%s", name, got, want)
				}
			}
		}
		if err := process.HTTPOK(p.readyURL)(t.Context()); err != nil {
			t.Error(err)
		}
		p.expectMetric(t, apiStatus("unreachable"), 1)
		p.expectLog(t, "cannot reach the Kubernetes API at https://"+proxy.Addr(), "answering from the last known state")
		expectOrdinary(t, s, kube, qs)
	})

	step("catches up when the API server is back", func(t *testing.T) {
		proxy.Up(t)
		s.expectWithin(t, 45*time.Second, native, dns.TypeA, answer(s.addrs(native, "10.99.0.8")))
		p.expectMetric(t, apiStatus("ok"), 1)
	})
}

// expectLog waits until the process's output has a line holding every one
// of parts.
func (p *coredns) expectLog(t *testing.T, parts ...string) {
	t.Helper()
	labtest.Eventually(t, answerTimeout, func(context.Context) error {
		for line := range strings.Lines(p.Output()) {
			if containsAll(line, parts) {
				return nil
			}
		}
		return fmt.Errorf("no line of the output holds all of %q", parts)
	})
}

func containsAll(s string, parts []string) bool {
	for _, part := range parts {
		if !strings.Contains(s, part) {
			return false
		}
	}
	return true
}

// TestStartupErrors: what retrying cannot fix stops coredns-mcs at
// start-up with an error naming the Corefile line, and no panic.
func TestStartupErrors(t *testing.T) {
	lab := labtest.Get(t)
	for _, c := range []struct {
		name   string
		stanza string // the mcs stanza, on line 2 of the Corefile
		want   []string
	}{
		{"kubeconfig missing", "mcs {\n kubeconfig /nonexistent/kubeconfig member1\n cluster member1\n}",
			[]string{"Corefile:3", "option kubeconfig", "/nonexistent/kubeconfig"}},
		{"no cluster name and no ClusterProperty", fmt.Sprintf("mcs {\n kubeconfig %s member1\n}", lab.Kubeconfig()),
			[]string{"Corefile:2", "option cluster is not set", "ClusterProperty cluster.clusterset.k8s.io does not exist"}},
		{"unknown option", fmt.Sprintf("mcs {\n kubeconfig %s member1\n cluster member1\n zone x\n}", lab.Kubeconfig()),
			[]string{"Corefile:5", `unknown option "zone"`}},
		{"bad ttl", fmt.Sprintf("mcs {\n kubeconfig %s member1\n cluster member1\n ttl 3601\n}", lab.Kubeconfig()),
			[]string{"Corefile:5", "option ttl", "3601"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if out := startupError(t, c.stanza); !containsAll(out, c.want) {
				t.Errorf("output does not hold %q:\n%s", c.want, out)
			}
		})
	}
}

// startupError runs bin/coredns-mcs with stanza on line 2 of its Corefile,
// and returns its output once it has failed at start-up, as it must, and
// without a panic.
func startupError(t *testing.T, stanza string) string {
	t.Helper()
	ports, err := loopback.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	corefile := filepath.Join(t.TempDir(), "Corefile")
	text := fmt.Sprintf("cluster.local:%d clusterset.local:%d {\n%s\n bind 127.0.0.1\n}\n", ports[0], ports[0], stanza)
	if err := os.WriteFile(corefile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary(t), "-conf", corefile).CombinedOutput()
	if err == nil || ctx.Err() != nil || strings.Contains(string(out), "panic:") {
		t.Fatalf("coredns-mcs did not fail at start-up, or panicked (%v):\n%s\nCorefile:\n%s", err, out, text)
	}
	return string(out)
}
