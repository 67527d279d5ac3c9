package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// run runs kubectl mcs with args, and returns its output and exit status.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs(args)
	code := exitCode(root.ExecuteContext(t.Context()), &out)
	return out.String(), code
}

// unreachable is a kubeconfig whose contexts hub and member1 name a
// server nothing listens on.
func unreachable(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "config")
	text := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts:
- {name: hub, context: {cluster: c, user: u}}
- {name: arn:aws:eks:eu-west-1:1:cluster/m1, context: {cluster: c, user: u}}
current-context: hub
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// diagnose exits 2 when it could not run (bad flags, bad arguments, the
// hub unreachable), and says why.
func TestDiagnoseCouldNotRun(t *testing.T) {
	kubeconfig := unreachable(t)
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"diagnose"}, "accepts 1 arg(s)"},
		{[]string{"diagnose", "foo", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"diagnose", "foo", "-o", "yaml"}, "-o yaml: json"},
		{[]string{"diagnose", "foo", "--kubeconfig", kubeconfig, "--hub-context", "hub", "--request-timeout", "2s"}, "the hub"},
	} {
		out, code := run(t, tc.args...)
		if code != 2 || !strings.Contains(out, tc.says) {
			t.Errorf("kubectl mcs %s: exit %d, want 2, saying %q:\n%s", strings.Join(tc.args, " "), code, tc.says, out)
		}
	}
}

func TestExitCodes(t *testing.T) {
	var out bytes.Buffer
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errChecksFailed, 1},
		{errors.New("join failed"), 1},
		{couldNotRun(errors.New("no hub")), 2},
	} {
		if got := exitCode(tc.err, &out); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// --member-context maps a member to a context not named after it, in
// status, diagnose and join; join refuses -n, the service's namespace
// elsewhere, rather than write the Secret where the user did not mean.
func TestMemberContexts(t *testing.T) {
	o := &hubOptions{memberContexts: map[string]string{"member1": "arn:aws:eks:eu-west-1:1:cluster/m1"}}
	if got := o.contextOf("member1"); got != "arn:aws:eks:eu-west-1:1:cluster/m1" {
		t.Errorf("contextOf(member1) = %q", got)
	}
	if got := o.contextOf("member2"); got != "member2" {
		t.Errorf("contextOf(member2) = %q, want its own name", got)
	}
	kubeconfig := unreachable(t)
	// The mapped context is the one join reaches: its server, unreachable here.
	out, code := run(t, "join", "member1", "--kubeconfig", kubeconfig, "--member-context", "member1=arn:aws:eks:eu-west-1:1:cluster/m1", "--request-timeout", "2s")
	if code != 1 || !strings.Contains(out, "127.0.0.1:1") {
		t.Errorf("join with --member-context: exit %d\n%s", code, out)
	}
	out, _ = run(t, "join", "member1", "--kubeconfig", kubeconfig, "--context", "hub", "--member-context", "member1=arn:aws:eks:eu-west-1:1:cluster/m1")
	if !strings.Contains(out, "--context hub and --member-context member1=arn:aws:eks:eu-west-1:1:cluster/m1 name two contexts") {
		t.Errorf("join with two contexts:\n%s", out)
	}
	for _, sub := range []string{"join", "unjoin"} {
		out, code := run(t, sub, "member1", "--kubeconfig", kubeconfig, "--context", "hub", "-n", "mcs-system")
		if code != 1 || !strings.Contains(out, "-n is the service's namespace in every kubectl mcs command") || !strings.Contains(out, "--controller-namespace") {
			t.Errorf("%s -n: exit %d\n%s", sub, code, out)
		}
	}
	// status reaches a mapped member through its context: the member's
	// error names the context it used.
	mapped := &hubOptions{flags: newFlags(kubeconfig), memberContexts: map[string]string{"member1": "nope"}}
	if _, err := mapped.memberConfig("member1"); err == nil || !strings.Contains(err.Error(), `context "nope" for member member1`) {
		t.Errorf("memberConfig through a missing mapped context: %v", err)
	}
}

// corefilePorts finds the ready plugin's and the metrics' ports.
func TestCorefilePorts(t *testing.T) {
	for _, tc := range []struct{ corefile, ready, metrics string }{
		{".:53 {\n    ready\n    prometheus :9153\n}", "8181", "9153"},
		{".:53 {\n    ready 127.0.0.1:8282\n    prometheus 0.0.0.0:9253\n}", "8282", "9253"},
		{".:53 {\n    errors\n}", "8181", "9153"},
	} {
		ready, metrics := corefilePorts(&tc.corefile)
		if ready != tc.ready || metrics != tc.metrics {
			t.Errorf("%q: %s %s, want %s %s", tc.corefile, ready, metrics, tc.ready, tc.metrics)
		}
	}
}

func newFlags(kubeconfig string) *genericclioptions.ConfigFlags {
	f := genericclioptions.NewConfigFlags(false)
	f.KubeConfig = &kubeconfig
	return f
}
