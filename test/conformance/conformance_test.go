//go:build lab

// Package conformance runs the upstream MCS API conformance suite
// (sigs.k8s.io/mcs-api/conformance) against the lab's member1 and member2,
// with mcs-controller in ServiceExport mode and coredns-mcs as both
// members' cluster DNS, and fails on any spec that does not pass
// (docs/conformance.md).
//
// make conformance runs it alone; make test runs it with the lab's other
// tests.
package conformance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

func TestMain(m *testing.M) {
	labtest.Main(m)
}

// skipped are the specs this design cannot support, by a substring of
// their full text, each with the reason; docs/conformance.md lists them
// too. A spec that fails is fixed, not listed here.
var skipped = map[string]string{}

// Identity of the implementation in the suite's report.
const (
	organization = "coredns-mcs"
	project      = "coredns-mcs"
	// projectURL is the module's path, where the source lives.
	projectURL = "https://github.com/coredns-mcs/coredns-mcs"
)

// suiteTimeout bounds one run of the whole suite (ginkgo's own timeout);
// a full run takes a few minutes on the lab, a failed connectivity spec
// over 3 (the suite retries it for 200 s).
const suiteTimeout = 20 * time.Minute

// extraFlagsEnv holds more of the suite's flags, separated by spaces, for
// a narrower run by hand: -ginkgo.focus=... or -ginkgo.label-filter=....
// make test leaves it unset.
const extraFlagsEnv = "MCS_CONFORMANCE_FLAGS"

func TestConformance(t *testing.T) {
	l := labtest.Get(t)
	l.Network(t) // the suite's pods run, and its traffic passes kube-proxy, only in a lab with its network
	out := filepath.Join(l.Root(), "_output", "conformance")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	suite := buildSuite(t, l.Root(), out)

	// coredns-mcs as kube-dns of both members: the request pods' dig and
	// nc resolve through it.
	labtest.ClusterDNS(t, labtest.Member1, labtest.Member2)
	startController(t, l, out)

	kubeconfig := l.KubeconfigOf(t, labtest.Member1, labtest.Member2)
	args := []string{
		"--kubeconfig", kubeconfig,
		"--contexts", labtest.Member1 + "," + labtest.Member2,
		"--organization", organization,
		"--project", project,
		"--version", version(l.Root()),
		"--url", projectURL,
		"-ginkgo.v", "-ginkgo.no-color",
		"-ginkgo.timeout", suiteTimeout.String(),
		"-ginkgo.json-report", ginkgoReport,
		"-test.timeout", "0",
	}
	if skip := skipRegexp(skipped); skip != "" {
		args = append(args, "-ginkgo.skip", skip)
	}
	extra := strings.Fields(os.Getenv(extraFlagsEnv))
	if len(extra) > 0 {
		t.Logf("%s narrows the run: the specs it leaves out do not fail the test", extraFlagsEnv)
	}
	args = append(args, extra...)
	for _, f := range []string{suiteReport, "report.html", ginkgoReport} {
		if err := os.Remove(filepath.Join(out, f)); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}

	logPath := filepath.Join(out, "suite.log")
	start := time.Now()
	runErr := runSuite(t, suite, out, logPath, args)
	t.Logf("the suite ran for %s; its output is in %s, its report in %s and %s",
		time.Since(start).Round(time.Second), logPath, filepath.Join(out, suiteReport), filepath.Join(out, "report.html"))

	results, err := readResults(out)
	if err != nil {
		t.Fatalf("the suite (%v) left no report: %v; see %s", runErr, err, logPath)
	}
	t.Logf("results:\n%s", results.table())
	if msg := results.failures(skipped, len(extra) > 0); msg != "" {
		t.Errorf("%s\nsee %s", msg, logPath)
	}
	if runErr != nil && !t.Failed() {
		t.Errorf("the suite failed (%v) with every spec passed; see %s", runErr, logPath)
	}
}

// startController runs bin/mcs-controller on the hub with member1 and
// member2 as its members, as the suite needs it: ServiceExports alone
// drive the imports (no MultiClusterService), and every namespace may
// export, since the suite makes its namespaces (mcs-conformance-<n>) in
// the members only, never on the hub. Its log is kept in out.
func startController(t *testing.T, l *labtest.Lab, out string) {
	t.Helper()
	ns := l.Namespace(t, labtest.Hub) // its member Secrets and Leases, none from another test
	p, addr := labtest.StartController(t, l.Binary(t, "mcs-controller"),
		"--kubeconfig", l.KubeconfigOf(t, labtest.Hub),
		"--clusters-kubeconfig", l.KubeconfigOf(t, labtest.Member1, labtest.Member2),
		"--namespace", ns, "--leader-elect=false", "--probe-interval", "1s",
		"--default-export-namespaces", "all")
	t.Cleanup(func() { // before it stops and its temporary directory goes
		if err := copyFile(p.Log(), filepath.Join(out, "mcs-controller.log")); err != nil {
			t.Log(err)
		}
	})
	if err := p.WaitFor(t.Context(), 2*time.Minute, process.HTTPOK("http://"+addr+"/readyz")); err != nil {
		t.Fatal(err)
	}
}

// runSuite runs the suite's binary in dir, its output into logPath and the
// test's log line by line, and returns how it ended.
func runSuite(t *testing.T, suite, dir, logPath string, args []string) error {
	t.Helper()
	t.Logf("running %s %s", suite, strings.Join(args, " "))
	log, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	r, w := io.Pipe()
	ctx, cancel := context.WithTimeout(t.Context(), suiteTimeout+5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, suite, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = w, w
	cmd.WaitDelay = 10 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			t.Log(sc.Text())
		}
		_, _ = io.Copy(log, r) // a line too long for the scanner: keep the rest in the file
	}()
	err = cmd.Run()
	w.Close()
	<-done
	return err
}

// skipRegexp is ginkgo's -ginkgo.skip for the specs of skip: any of
// their texts, literally.
func skipRegexp(skip map[string]string) string {
	var parts []string
	for text := range skip {
		parts = append(parts, regexp.QuoteMeta(text))
	}
	slices.Sort(parts)
	return strings.Join(parts, "|")
}

// version is git describe of the repository, dev when that fails.
func version(root string) string {
	b, err := exec.Command("git", "-C", root, "describe", "--tags", "--always", "--dirty").Output()
	if v := strings.TrimSpace(string(b)); err == nil && v != "" {
		return v
	}
	return "dev"
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
