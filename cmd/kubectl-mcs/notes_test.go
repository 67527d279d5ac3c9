package main

import (
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// hubChartNotes are the notes helm install prints for the hub chart
// (deploy/helm/coredns-mcs-controller/templates/NOTES.txt), rendered by
// Helm's SDK for a release in namespace.
func hubChartNotes(t *testing.T, namespace string) string {
	t.Helper()
	// Helm logs each link of the chart it follows (deploy/helm_test.go).
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	chrt, err := loader.Load(filepath.Join("..", "..", "deploy", "helm", "coredns-mcs-controller"))
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun = true, true
	install.ReleaseName, install.Namespace = "mcs-controller", namespace
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}
	rel, err := install.Run(chrt, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rel.Info.Notes
}

// placeholder is a word the notes ask the operator to replace.
var placeholder = regexp.MustCompile(`^[A-Z]+$`)

// Every kubectl mcs command the hub chart's notes print runs as they print
// it, with this plugin's own command tree: the operator's MEMBER and HUB
// (each placeholder, lower-cased) are a cluster's name and contexts of a
// kubeconfig whose clusters cannot be reached, so a
// command whose flags and arguments are all accepted fails reaching one,
// and any other failure (an unknown flag, -n where join refuses it, a
// missing argument) is the notes' fault. The release's namespace is not
// mcs-system, so the notes must pass it on.
func TestHubChartNotesRun(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	// Two servers: join refuses a member whose API server is the hub's.
	text := `apiVersion: v1
kind: Config
clusters: [{name: hub, cluster: {server: "https://127.0.0.1:1"}}, {name: member, cluster: {server: "https://127.0.0.2:1"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: hub, context: {cluster: hub, user: u}}
- {name: member, context: {cluster: member, user: u}}
current-context: hub
`
	if err := os.WriteFile(kubeconfig, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	notes := hubChartNotes(t, "hub-system")
	var commands int
	for line := range strings.Lines(notes) {
		args := strings.Fields(line)
		if len(args) < 3 || args[0] != "kubectl" || args[1] != "mcs" {
			continue
		}
		commands++
		args = args[2:]
		for i, a := range args {
			switch {
			case placeholder.MatchString(a):
				args[i] = strings.ToLower(a)
			case i > 0 && !strings.HasPrefix(a, "-") && a != "hub-system":
				t.Errorf("kubectl mcs %s: %q is neither a flag, a placeholder nor the release's namespace", strings.TrimSpace(line), a)
			}
		}
		if !strings.Contains(line, "--controller-namespace hub-system") {
			t.Errorf("%s: the controller runs in hub-system, which the command does not name", strings.TrimSpace(line))
		}
		out, code := run(t, append(args, "--kubeconfig", kubeconfig, "--request-timeout", "2s")...)
		if code != 1 || !strings.Contains(out, "https://127.0.0.") {
			t.Errorf("%s, as the notes print it: exit %d, want it to fail only at reaching the clusters:\n%s", strings.TrimSpace(line), code, out)
		}
	}
	if commands == 0 {
		t.Fatalf("the notes print no kubectl mcs command:\n%s", notes)
	}
}
