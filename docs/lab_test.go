//go:build lab

package docs_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

func TestMain(m *testing.M) {
	labtest.Main(m)
}

// converge bounds how long a block with an expected output is run again
// until it prints it.
const converge = 60 * time.Second

// startTimeout bounds the wait for mcs-controller and coredns-mcs to be
// ready, and for the hub's namespaces to go: the kubernetes plugin waits for
// its API server, which other tests of the shared lab may keep busy (or
// freeze) for a while.
const startTimeout = 2 * time.Minute

// blockTimeout bounds one run of a block.
const blockTimeout = 2 * time.Minute

// TestDocCommands runs the commands of every page of docs/ against the lab
// (blocks_test.go says how), page by page, each with its own namespace in
// place of demo, and with what the pages install standing in as local
// processes: the hub overlay and the member overlays are only dry runs here
// (they would change the shared lab's kube-system, cluster-wide RBAC and the
// hub's mcs-system), so this test runs bin/mcs-controller against the hub
// with the members as kubeconfig contexts, limited to the pages' namespaces,
// and member2's bin/coredns-mcs on loopback with the mcs stanza of
// corefile/Corefile (answer vip, as in a member; the pages only ask DNS for
// a ClusterIP, never connect to it). Blocks run in a copy of deploy/, from
// the top of that copy, so that nothing they write lands in the repository.
func TestDocCommands(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t) // the hub overlay's CRD, which the pages apply as a dry run
	blocks := allBlocks(t)
	namespaces := map[string]string{}
	for page := range blocks {
		ns := fmt.Sprintf("doc-%s-%05d", strings.TrimSuffix(page, ".md"), rand.IntN(100000))
		namespaces[page] = ns
	}
	// The members' namespaces once the controller has stopped: it would
	// create a consumer's namespace again while a provider's, with its
	// ServiceExport, is terminating.
	t.Cleanup(func() { deleteNamespaces(t, namespaces, labtest.Members...) })
	// One controller and one coredns-mcs serve every page, each page in a
	// namespace of its own; they start together, which takes a while on a
	// busy lab.
	start := time.Now()
	ready := startController(t, slices.Collect(maps.Values(namespaces)))
	dnsAddr := labtest.StartMemberDNS(t, l.Binary(t, "coredns-mcs"), l.Kubeconfig(), labtest.Member2, startTimeout)
	if err := ready(); err != nil {
		t.Fatal(err)
	}
	t.Logf("mcs-controller and coredns-mcs ready in %.1fs", time.Since(start).Seconds())
	// The hub's first, registered after the controller so that it runs
	// before the controller stops: deleting a page's MultiClusterServices
	// needs the controller, which removes their finalizers once it has
	// cleaned the members.
	t.Cleanup(func() { deleteNamespaces(t, namespaces, labtest.Hub) })
	for _, page := range pages(t) {
		t.Run(page, func(t *testing.T) {
			if len(blocks[page]) == 0 {
				t.Logf("%s has no commands", page)
				return
			}
			newPage(t, namespaces[page], dnsAddr).run(t, blocks[page])
		})
	}
}

// pageRun is what one page's blocks run with.
type pageRun struct {
	ns    string   // replaces demo
	dir   string   // the working directory, a copy of deploy/ under a top of its own
	env   []string // KUBECONFIG, PATH with the lab's kubectl and a dig that asks member2's coredns-mcs, DNS
	fleet []string // the environment of fleet blocks' checks
	state string   // the variables of the blocks run so far
}

func newPage(t *testing.T, ns, dnsAddr string) *pageRun {
	l := labtest.Get(t)
	root := l.Root()
	p := &pageRun{ns: ns}
	tmp := t.TempDir()
	p.dir = filepath.Join(tmp, "top")
	if err := os.CopyFS(filepath.Join(p.dir, "deploy"), os.DirFS(filepath.Join(root, "deploy"))); err != nil {
		t.Fatal(err)
	}
	p.state = filepath.Join(tmp, "state")
	if err := os.WriteFile(p.state, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	kubectl := filepath.Join(root, "_output", "bin", "kubectl")
	dig, err := exec.LookPath("dig")
	if err != nil {
		t.Fatalf("dig is needed (Debian's bind9-dnsutils): %v", err)
	}
	bin := filepath.Join(tmp, "bin")
	script(t, bin, "kubectl", fmt.Sprintf("exec %q \"$@\"\n", kubectl))
	// kubectl finds its plugin kubectl-mcs on the PATH, as a reader's does.
	plugin := l.Binary(t, "kubectl-mcs")
	script(t, bin, "kubectl-mcs", fmt.Sprintf("exec %q \"$@\"\n", plugin))
	host, port, err := net.SplitHostPort(dnsAddr)
	if err != nil {
		t.Fatal(err)
	}
	script(t, bin, "dig", fmt.Sprintf("exec %q -p %s \"$@\"\n", dig, port))
	p.env = append(os.Environ(), "KUBECONFIG="+l.Kubeconfig(), "PATH="+bin+":"+os.Getenv("PATH"), "DNS="+host)

	// A fleet block's kubectl prints its help instead of running: that
	// rejects unknown flags, and a command with subcommands of its own
	// means a subcommand was misspelt. What follows -- is the command a pod
	// runs (kubectl run, exec), not kubectl's: --help goes before it.
	// Nothing else is on the PATH, and bash lets commands it does not find
	// pass.
	check := filepath.Join(tmp, "fleet")
	script(t, check, "kubectl-mcs", fmt.Sprintf("exec %q \"$@\"\n", plugin))
	script(t, check, "kubectl", fmt.Sprintf(`args=(); for a in "$@"; do [[ $a == -- ]] && break; args+=("$a"); done
out=$(%q "${args[@]}" --help 2>&1) || { echo "kubectl $*: $out" >&2; exit 1; }
if [[ $out == *$'\n'"Available Commands:"* ]]; then echo "kubectl $*: not a command kubectl knows" >&2; exit 1; fi
`, kubectl))
	p.fleet = []string{"PATH=" + check, "HOME=" + tmp, "KUBECONFIG=" + filepath.Join(tmp, "none"), "DNS=127.0.0.1"}
	return p
}

// script writes an executable bash script name into dir.
func script(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

var demo = regexp.MustCompile(`\bdemo\b`)

func (p *pageRun) run(t *testing.T, blocks []block) {
	counts := map[string]int{}
	for _, b := range blocks {
		start := time.Now()
		switch b.mode {
		case modeRun:
			p.runBlock(t, b)
		case modeDryRun:
			s, err := dryRun(b.script)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if out, err := p.bash(t, p.env, p.withState(s)); err != nil {
				t.Fatalf("%s (dry run): %v\n%s", b, err, out)
			}
		case modeFleet:
			if out, err := p.bash(t, p.fleet, "command_not_found_handle() { return 0; }\n"+b.script); err != nil {
				t.Fatalf("%s (fleet, checked only): %v\n%s", b, err, out)
			}
		}
		counts[b.mode]++
		t.Logf("%s %s: %.1fs", b, b.mode, time.Since(start).Seconds())
	}
	t.Logf("%d blocks run, %d as dry runs, %d checked only (fleet)", counts[modeRun], counts[modeDryRun], counts[modeFleet])
}

// runBlock runs b in the page's namespace and, when b says what it prints,
// runs it again until it prints that.
func (p *pageRun) runBlock(t *testing.T, b block) {
	s := demo.ReplaceAllString(b.script, p.ns)
	want := demo.ReplaceAllString(b.want, p.ns)
	deadline := time.Now().Add(converge)
	for {
		out, err := p.bash(t, p.env, p.withState(s))
		if err != nil {
			t.Fatalf("%s: %v\n%s", b, err, out)
		}
		if want == "" {
			return
		}
		err = matchOutput(want, out)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not print what the page says within %s: %v", b, converge, err)
		}
		time.Sleep(time.Second)
	}
}

// withState makes script start with the variables the blocks before it set,
// as in a reader's shell, and keep its own for the blocks after it.
func (p *pageRun) withState(script string) string {
	return fmt.Sprintf("set -a\nsource %q\ntrap 'export -p > %q' EXIT\n%s", p.state, p.state, script)
}

// bash runs script with env in the page's directory, stopping at the first
// command that fails, and returns its standard output (with its standard
// error on failure).
func (p *pageRun) bash(t *testing.T, env []string, script string) (string, error) {
	ctx, cancel := context.WithTimeout(t.Context(), blockTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir, cmd.Env = p.dir, env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// deleteNamespaces deletes the pages' namespaces in clusters, wherever their
// commands or the controller created them, and waits until they are gone
// from the hub.
func deleteNamespaces(t *testing.T, namespaces map[string]string, clusters ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	l := labtest.Get(t)
	for _, ns := range namespaces {
		for _, c := range clusters {
			// Other tests of the shared lab restart API servers: try again.
			var last error
			err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
				last = l.Client(t, c).CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
				return last == nil || apierrors.IsNotFound(last), nil
			})
			if err != nil {
				t.Errorf("deleting namespace %s in %s: %v", ns, c, last)
			}
		}
	}
	if !slices.Contains(clusters, labtest.Hub) {
		return
	}
	start := time.Now()
	var left []string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left = nil
		for _, ns := range namespaces {
			if _, err := l.Client(t, labtest.Hub).CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				left = append(left, ns)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("namespaces %v of the hub are still there after %s (a MultiClusterService's finalizer?)", left, startTimeout)
		return
	}
	t.Logf("the pages' namespaces gone from the hub in %.1fs", time.Since(start).Seconds())
}

// startController starts bin/mcs-controller as the hub overlay's Deployment
// would, limited to namespaces, its own state in a namespace of its own, and
// returns a wait until it is ready.
func startController(t *testing.T, namespaces []string) (ready func() error) {
	t.Helper()
	l := labtest.Get(t)
	p, addr := labtest.StartController(t, l.Binary(t, "mcs-controller"),
		"--kubeconfig", l.KubeconfigOf(t, labtest.Hub), "--clusters-kubeconfig", l.MembersKubeconfig(t),
		"--namespace", l.Namespace(t, labtest.Hub), "--watch-namespaces", strings.Join(namespaces, ","),
		"--leader-elect=false", "--probe-interval", "1s", "--create-namespaces")
	return func() error { return p.WaitFor(t.Context(), startTimeout, process.HTTPOK("http://"+addr+"/readyz")) }
}
