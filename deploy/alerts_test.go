// The alerts tested by what they do: Prometheus's own rule unit tests,
// components/monitoring-*/alerts_test.yaml, run by promtool on series as
// the replicas export them.

package deploy_test

import (
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// promtool is _output/bin/promtool, which make test builds first (make
// promtool: test/lab/build.sh promtool).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "_output", "bin", "promtool"))
	if err == nil {
		_, err = os.Stat(path)
	}
	if err != nil {
		t.Fatalf("no promtool to test the alerts with (%v): build it with make promtool", err)
	}
	return path
}

// Every alert of both components fires on the series of its tests, with
// the labels and summary they expect, and stays silent on a healthy
// controller (one shard, and four) and on healthy CoreDNS replicas. The
// PrometheusRule's spec.groups are the rule file, with the summary the
// only annotation: the tests say what an alert is about, not how the
// description reads, which promtool check rules parses in the full file.
func TestAlertsByPromtool(t *testing.T) {
	bin := promtool(t)
	for _, a := range monitoringAlerts {
		t.Run(a.name, func(t *testing.T) {
			dir, groups := t.TempDir(), a.groups(t)
			full := filepath.Join(dir, "full.yaml")
			writeRuleFile(t, full, groups)
			runPromtool(t, bin, "check", "rules", full)
			writeRuleFile(t, filepath.Join(dir, "rules.yaml"), summaryOnly(groups))
			runPromtool(t, bin, "test", "rules", copyInto(t, dir, a.tests))
		})
	}
}

// copyInto copies the file at path into dir, where the rule file its
// rule_files names is, and returns the copy's path.
func copyInto(t *testing.T, dir, path string) string {
	t.Helper()
	to := filepath.Join(dir, filepath.Base(path))
	b, err := os.ReadFile(path)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	return to
}

// writeRuleFile writes groups as a Prometheus rule file, in JSON, which is
// YAML.
func writeRuleFile(t *testing.T, path string, groups []ruleGroup) {
	t.Helper()
	b, err := json.Marshal(map[string][]ruleGroup{"groups": groups})
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// summaryOnly is groups with every annotation but the summary left out.
func summaryOnly(groups []ruleGroup) []ruleGroup {
	var out []ruleGroup
	for _, g := range groups {
		short := ruleGroup{Name: g.Name}
		for _, r := range g.Rules {
			r.Annotations = map[string]string{"summary": r.Annotations["summary"]}
			short.Rules = append(short.Rules, r)
		}
		out = append(out, short)
	}
	return out
}

func runPromtool(t *testing.T, bin string, args ...string) {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), bin, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// promtoolTests is what TestEveryAlertIsTested reads of a promtool test
// file.
type promtoolTests struct {
	Tests []struct {
		Name          string
		AlertRuleTest []struct {
			EvalTime  string            `json:"eval_time"`
			Alertname string            `json:"alertname"`
			ExpAlerts []json.RawMessage `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	}
}

// healthy starts the names of the test groups that leave every alert
// silent.
const healthy = "healthy"

// A new alert needs tests: every alert of both components fires in a test
// of its component's alerts_test.yaml, and every group named "healthy…"
// checks it silent past its for. A test of a name no alert has would pass
// whatever the rules say: none may.
func TestEveryAlertIsTested(t *testing.T) {
	for _, a := range monitoringAlerts {
		rules := map[string]rule{}
		for _, r := range a.rules(t) {
			rules[r.Alert] = r
		}
		fires, silentIn, healthyGroups := map[string]bool{}, map[string]map[string]bool{}, 0
		for _, g := range readPromtoolTests(t, a.tests).Tests {
			isHealthy := strings.HasPrefix(g.Name, healthy)
			if isHealthy {
				healthyGroups++
			}
			for _, c := range g.AlertRuleTest {
				r, ok := rules[c.Alertname]
				if !ok {
					t.Errorf("%s: group %q tests %q, which is no alert of %s", a.tests, g.Name, c.Alertname, a.name)
				}
				fires[c.Alertname] = fires[c.Alertname] || len(c.ExpAlerts) > 0
				if isHealthy && len(c.ExpAlerts) == 0 && pastFor(t, c.EvalTime, r.For) {
					if silentIn[c.Alertname] == nil {
						silentIn[c.Alertname] = map[string]bool{}
					}
					silentIn[c.Alertname][g.Name] = true
				}
			}
		}
		if healthyGroups == 0 {
			t.Errorf("%s: no test group named %q…", a.tests, healthy)
		}
		for _, name := range slices.Sorted(maps.Keys(rules)) {
			if !fires[name] {
				t.Errorf("%s: no test of %s firing (exp_alerts)", a.tests, name)
			}
			if len(silentIn[name]) < healthyGroups {
				t.Errorf("%s: %s is checked silent past its for (%s) in %d of the %d %q groups", a.tests, name, rules[name].For, len(silentIn[name]), healthyGroups, healthy)
			}
		}
	}
}

func readPromtoolTests(t *testing.T, path string) promtoolTests {
	t.Helper()
	var file promtoolTests
	b, err := os.ReadFile(path)
	if err == nil {
		err = yaml.Unmarshal(b, &file)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return file
}

// pastFor reports whether evalTime is later than an alert's for: earlier,
// silence shows nothing.
func pastFor(t *testing.T, evalTime, wait string) bool {
	t.Helper()
	at, err := time.ParseDuration(evalTime)
	if err != nil {
		t.Errorf("eval_time %q: %v", evalTime, err)
	}
	d, err := time.ParseDuration(wait)
	return err == nil && at > d
}
