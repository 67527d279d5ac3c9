// The metric names of the alerts and the dashboard, checked against what
// the two programs export.

package deploy_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	dto "github.com/prometheus/client_model/go"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// ruleQueries are the expressions of rules, named by their alerts.
func ruleQueries(rs []rule) []query {
	var out []query
	for _, r := range rs {
		out = append(out, query{"alert " + r.Alert, r.Expr})
	}
	return out
}

// unexported says, for each query, what it selects that exported lacks,
// or that it selects nothing this check can find.
func unexported(queries []query, exported map[string]bool) []string {
	var problems []string
	for _, q := range queries {
		names, err := metricNames(q.expr)
		if err == nil && len(names) == 0 {
			err = errors.New("selects no metric")
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", q.where, err))
		}
		for _, n := range names {
			if !exported[n] {
				problems = append(problems, fmt.Sprintf("%s: %s is not exported (%s)", q.where, n, q.expr))
			}
		}
	}
	return problems
}

// exportedNames are the names PromQL can select of a /metrics page: each
// family's, and a histogram's or summary's series (_bucket, _sum, _count).
// A labelled family appears only once it has a series: what was never
// counted is not on the page.
func exportedNames(families map[string]*dto.MetricFamily) map[string]bool {
	out := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			out[name], out[name+"_sum"], out[name+"_count"] = true, true, true
		default:
			out[name] = true
		}
	}
	return out
}

// scrape reads the names of the /metrics page at url.
func scrape(t *testing.T, url string) map[string]bool {
	t.Helper()
	families, err := process.Scrape(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	return exportedNames(families)
}

// memberCorefile is the mcs stanza of corefile/Corefile on loopback ports,
// with the prometheus plugin as the member Corefile has it, reading the
// API through a kubeconfig's context.
const memberCorefile = `cluster.local:%[1]d clusterset.local:%[1]d {
    bind 127.0.0.1
    prometheus 127.0.0.1:%[2]d
    mcs cluster.local clusterset.local {
        kubeconfig %[3]s %[4]s
        cluster %[4]s
    }
}
`

// startCoreDNS runs binary, a coredns-mcs, on memberCorefile until the
// test ends, and returns its DNS address and metrics URL once it answers.
func startCoreDNS(t *testing.T, binary, kubeconfig, context string) (dnsAddr, metricsURL string) {
	t.Helper()
	dir := t.TempDir()
	p, ports, err := process.StartCoreDNSOnFreePorts(t.Context(), 2, time.Minute, func(ports []int) (process.Config, string, error) {
		corefile := filepath.Join(dir, "Corefile")
		err := os.WriteFile(corefile, fmt.Appendf(nil, memberCorefile, ports[0], ports[1], kubeconfig, context), 0o644)
		return process.CoreDNS("coredns-mcs", binary, corefile, filepath.Join(dir, "coredns.log")), fmt.Sprintf("127.0.0.1:%d", ports[0]), err
	})
	if err != nil && p != nil {
		err = fmt.Errorf("%w; it said:\n%s", err, p.Output())
	}
	if err != nil {
		t.Fatal(err)
	}
	p.StopAtCleanup(t)
	return fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d/metrics", ports[1])
}

// build compiles cmd/name of this tree as make build does, into the test's
// temporary directory (a warm build cache makes it a link).
func build(t *testing.T, name string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.CommandContext(t.Context(), "go", "build", "-trimpath", "-o", out, "./cmd/"+name)
	cmd.Dir, cmd.Env = "..", append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/%s: %v\n%s", name, err, b)
	}
	return out
}

// downAPIServer writes a kubeconfig whose context member names an API
// server nobody listens at.
func downAPIServer(t *testing.T, member string) string {
	t.Helper()
	ports, err := loopback.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: down, cluster: {server: "https://127.0.0.1:%d"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: %s, context: {cluster: down, user: u}}]
current-context: %s
`, ports[0], member, member)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The member alerts and the dashboard's coredns-mcs panels use only
// metrics coredns-mcs exports: the binary built from this tree runs with its
// API server down (what two of the alerts are about) and answers one
// clusterset.local name, SERVFAIL before its sync, so that
// coredns_mcs_requests_total, labelled, has a series. The controller's
// need it running against clusters: TestHubAlertsAndPanelsUseControllerMetrics,
// with the lab.
func TestMemberAlertsAndPanelsUseCoreDNSMetrics(t *testing.T) {
	dnsAddr, metricsURL := startCoreDNS(t, build(t, "coredns-mcs"), downAPIServer(t, "member1"), "member1")
	r, err := dns.Exchange(new(dns.Msg).SetQuestion("serve.demo.svc.clusterset.local.", dns.TypeA), dnsAddr)
	if err != nil || r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("serve.demo.svc.clusterset.local before sync: %v, %v; want SERVFAIL", r, err)
	}
	queries := append(ruleQueries(memberAlerts.rules(t)), dashboardQueries(renderedDashboard(t), "coredns-mcs")...)
	for _, p := range unexported(queries, scrape(t, metricsURL)) {
		t.Errorf("coredns-mcs: %s", p)
	}
}
