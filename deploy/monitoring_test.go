// The monitoring components as a user reads them: the alerts and the
// dashboard.

package deploy_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// rule is an alerting rule of a PrometheusRule, as a Prometheus rule file
// has it.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ruleGroup is a group of a PrometheusRule's spec, as a Prometheus rule
// file has it.
type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

// alerts are the alerts of a monitoring component: the PrometheusRule name
// that the example dir renders, and their promtool tests (alerts_test.go).
type alerts struct{ dir, name, tests string }

var (
	hubAlerts    = alerts{"examples/hub-with-components", "mcs-controller", "components/monitoring-hub/alerts_test.yaml"}
	memberAlerts = alerts{"examples/member1-with-components", "coredns-mcs", "components/monitoring-member/alerts_test.yaml"}
	// monitoringAlerts are both components'.
	monitoringAlerts = []alerts{hubAlerts, memberAlerts}
)

// groups are the rule groups of the rendered PrometheusRule.
func (a alerts) groups(t *testing.T) []ruleGroup {
	t.Helper()
	var spec struct{ Groups []ruleGroup }
	decode(t, find(t, render(t, a.dir), "PrometheusRule", a.name).Object["spec"], &spec)
	return spec.Groups
}

// rules are the alerting rules of the rendered PrometheusRule.
func (a alerts) rules(t *testing.T) []rule {
	t.Helper()
	var out []rule
	for _, g := range a.groups(t) {
		out = append(out, g.Rules...)
	}
	return out
}

// decode converts a rendered object's part into a Go value, as JSON.
func decode(t *testing.T, from any, to any) {
	t.Helper()
	b, err := json.Marshal(from)
	if err == nil {
		err = json.Unmarshal(b, to)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// runbooks is where every alert's runbook_url points: a section of this
// repository's docs.
const runbooks = "https://github.com/coredns-mcs/coredns-mcs/blob/main/"

// Every alert waits before it fires, has a severity, says what is wrong
// and what it means, and points to the section of docs/ that says what to
// do; no two alerts share a name.
func TestAlertsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range append(hubAlerts.rules(t), memberAlerts.rules(t)...) {
		if r.Alert == "" || seen[r.Alert] {
			t.Errorf("alert %q (%s): no name, or a name taken already", r.Alert, r.Expr)
		}
		seen[r.Alert] = true
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for %q, want a wait: a blip must not page", r.Alert, r.For)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("%s: no %s", r.Alert, a)
			}
		}
		if err := checkRunbook(r.Annotations["runbook_url"]); err != nil {
			t.Errorf("%s: %v", r.Alert, err)
		}
	}
}

// checkRunbook checks that url is a heading of a Markdown file of this
// repository, on GitHub.
func checkRunbook(url string) error {
	path, anchor, ok := strings.Cut(strings.TrimPrefix(url, runbooks), "#")
	if !strings.HasPrefix(url, runbooks) || !ok {
		return fmt.Errorf("runbook %q is no section of a file under %s", url, runbooks)
	}
	text, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		return fmt.Errorf("runbook %s: %w", url, err)
	}
	if !slices.Contains(headingAnchors(text), anchor) {
		return fmt.Errorf("runbook %s: %s has no heading #%s", url, path, anchor)
	}
	return nil
}

// headingAnchors are the anchors GitHub gives the headings of a Markdown
// text: lower case, spaces made hyphens, punctuation but - and _ dropped.
// Lines of fenced code (shell comments) are no headings.
func headingAnchors(text []byte) []string {
	var anchors []string
	fenced := false
	for s := bufio.NewScanner(bytes.NewReader(text)); s.Scan(); {
		line := s.Text()
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		title := strings.TrimLeft(line, "#")
		if fenced || title == line || !strings.HasPrefix(title, " ") {
			continue
		}
		anchors = append(anchors, strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				return unicode.ToLower(r)
			}
			return -1
		}, strings.TrimSpace(title)))
	}
	return anchors
}

// dashboard is what the tests read of the Grafana dashboard.
type dashboard struct {
	UID        string
	Templating struct{ List []variable }
	Panels     []panel
}

type variable struct{ Name, Type, Query string }

type panel struct {
	Type, Title string
	Datasource  struct{ UID string }
	Targets     []target
}

type target struct{ Expr string }

// renderedDashboard is the dashboard as the hub component delivers it, in
// the ConfigMap Grafana's sidecar loads.
func renderedDashboard(t *testing.T) dashboard {
	t.Helper()
	cm := find(t, render(t, "examples/hub-with-components"), "ConfigMap", "coredns-mcs-dashboard")
	text, _, _ := unstructured.NestedString(cm.Object, "data", "dashboard.json")
	var d dashboard
	if err := json.Unmarshal([]byte(text), &d); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("the dashboard's ConfigMap is labelled %v; Grafana's sidecar loads those labelled grafana_dashboard=1", cm.GetLabels())
	}
	return d
}

// The dashboard imports into any Grafana with a Prometheus: it has a uid,
// asks for the Prometheus to use, and every panel queries that one. Every
// panel is under a row that names the program it shows, whose metrics are
// in another Prometheus than the other's when each cluster has its own.
func TestDashboard(t *testing.T) {
	d := renderedDashboard(t)
	if d.UID == "" || !slices.Contains(d.Templating.List, variable{"datasource", "datasource", "prometheus"}) {
		t.Errorf("dashboard uid %q, variables %v; want a uid and the variable datasource of Prometheus data sources", d.UID, d.Templating.List)
	}
	row := ""
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = rowOf(p.Title)
			continue
		}
		if row == "" {
			t.Errorf("panel %q is under no row naming one of %v", p.Title, programs)
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 || slices.Contains(p.Targets, target{}) {
			t.Errorf("panel %q: data source %q, queries %v; want ${datasource} and a query each", p.Title, p.Datasource.UID, p.Targets)
		}
	}
	for _, program := range programs {
		if len(dashboardQueries(d, program)) == 0 {
			t.Errorf("no panel shows %s", program)
		}
	}
}

// query is a PromQL expression and where it comes from.
type query struct{ where, expr string }

// programs are the two programs, which the dashboard's rows name first.
var programs = []string{"mcs-controller", "coredns-mcs"}

// rowOf is the program whose metrics the panels under a row show.
func rowOf(title string) string {
	for _, p := range programs {
		if strings.HasPrefix(title, p+" ") {
			return p
		}
	}
	return ""
}

// dashboardQueries are the queries of the panels showing program's metrics.
func dashboardQueries(d dashboard, program string) []query {
	var out []query
	row := ""
	for _, p := range d.Panels {
		if p.Type == "row" {
			row = rowOf(p.Title)
			continue
		}
		for _, q := range p.Targets {
			if row == program {
				out = append(out, query{"panel " + p.Title, q.Expr})
			}
		}
	}
	return out
}
