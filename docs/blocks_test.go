package docs_test

// The docs' commands are tested, so that none can rot: every ```sh block of
// docs/*.md is run by TestDocCommands (lab_test.go, build tag lab) against
// the lab, in the order of its page. This file reads the blocks and checks,
// without the lab, that each is well-formed.
//
// How a block is run is said by an HTML comment right above its fence, which
// readers do not see rendered:
//
//	(none)                       run as written: on the lab, in a namespace of
//	                             the test's own (below)
//	<!-- doctest: dry-run -->    every line is a kubectl write, run with
//	                             --dry-run=server: for what would change what
//	                             other users of the shared lab rely on
//	                             (kube-system's CoreDNS objects, cluster-wide
//	                             RBAC, the hub's mcs-system)
//	<!-- doctest: fleet -->      needs a real fleet (a kubelet, the Service-
//	                             Accounts a dry run does not create, a Karmada
//	                             control plane, the kustomize CLI): not run;
//	                             bash checks its syntax and kubectl its
//	                             subcommands and flags (kubectl ... --help
//	                             rejects unknown flags and must name a leaf
//	                             command); other tools in it go unchecked
//
// A ```text block right below a ```sh block (blank lines between at most) is
// what the block prints: TestDocCommands compares it with the block's
// standard output, and runs the block again until it matches, for up to
// converge, as a reader would look again while things settle; such a block
// must only look, never change anything. Runs of spaces
// are one space (kubectl's columns); <name> stands for one word, and every
// <name> of the same name must be the same word (so "the answer is the
// derived Service's ClusterIP" is checked, not just "an address").
//
// The docs speak of the clusters by their kubeconfig contexts hub, member1
// and member2, which are the lab's, and of namespace demo, which the test
// replaces with a fresh one per page (demo as a whole word, in commands and
// expected output). $DNS is the address of member2's cluster DNS; in the lab
// it is coredns-mcs on a loopback port, which a dig on the PATH adds.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Modes of a block.
const (
	modeRun    = "run"
	modeDryRun = "dry-run"
	modeFleet  = "fleet"
)

// block is one ```sh block of a page and the output it is said to print.
type block struct {
	page, mode string
	line       int    // of the opening fence, 1-based
	script     string // the commands, without the fence's indentation
	want       string // the ```text block right below it, if any
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.page, b.line) }

var (
	fence     = regexp.MustCompile("^(\\s*)```\\s*(\\S*)\\s*$")
	directive = regexp.MustCompile(`^\s*<!--\s*doctest:\s*(\S+)\s*-->\s*$`)
)

// readBlocks returns the ```sh blocks of the Markdown file path, with their
// modes and expected outputs.
func readBlocks(path string) ([]block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	page := filepath.Base(path)
	var (
		blocks   []block
		lines    []string
		sc       = bufio.NewScanner(f)
		lastSh   = -1 // index into blocks of an sh block nothing but blank lines followed yet
		mode     = ""
		inFence  bool
		lang     string
		indent   string
		startsAt int
	)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		m := fence.FindStringSubmatch(text)
		switch {
		case !inFence && m != nil:
			inFence, indent, lang, startsAt, lines = true, m[1], m[2], n, nil
		case inFence && m != nil && m[2] == "":
			inFence = false
			body := strings.Join(lines, "\n") + "\n"
			switch {
			case lang == "sh":
				if mode == "" {
					mode = modeRun
				}
				blocks = append(blocks, block{page: page, mode: mode, line: startsAt, script: body})
				lastSh = len(blocks) - 1
				mode = ""
				continue
			case lang == "text" && lastSh >= 0:
				blocks[lastSh].want = body
			case mode != "":
				return nil, fmt.Errorf("%s:%d: a doctest directive above a %q block; only sh blocks take one", page, startsAt, lang)
			}
			lastSh, mode = -1, ""
		case inFence:
			lines = append(lines, strings.TrimPrefix(text, indent))
		case strings.TrimSpace(text) == "":
		default:
			if d := directive.FindStringSubmatch(text); d != nil {
				switch d[1] {
				case modeDryRun, modeFleet:
					mode = d[1]
				default:
					return nil, fmt.Errorf("%s:%d: unknown doctest mode %q (want %s or %s)", page, n, d[1], modeDryRun, modeFleet)
				}
				continue
			}
			if mode != "" {
				return nil, fmt.Errorf("%s:%d: a doctest directive must be right above an sh block", page, n)
			}
			lastSh = -1
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inFence {
		return nil, fmt.Errorf("%s:%d: the block is never closed", page, startsAt)
	}
	return blocks, nil
}

// pages are the docs whose commands are tested.
func pages(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return files
}

// allBlocks reads the blocks of every page.
func allBlocks(t *testing.T) map[string][]block {
	t.Helper()
	out := map[string][]block{}
	for _, p := range pages(t) {
		b, err := readBlocks(p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = b
	}
	return out
}

// Every block parses as bash, and a dry-run block is kubectl writes only,
// one to a line, so that --dry-run=server can be added to each.
func TestBlocksAreWellFormed(t *testing.T) {
	n := 0
	for _, blocks := range allBlocks(t) {
		for _, b := range blocks {
			n++
			if out, err := exec.Command("bash", "-n", "-c", b.script).CombinedOutput(); err != nil {
				t.Errorf("%s: bash -n: %v\n%s", b, err, out)
			}
			if b.mode == modeDryRun {
				if _, err := dryRun(b.script); err != nil {
					t.Errorf("%s: %v", b, err)
				}
			}
			if b.want != "" && b.mode != modeRun {
				t.Errorf("%s: an expected output below a %s block, which is not run", b, b.mode)
			}
		}
	}
	if n == 0 {
		t.Fatal("no sh block in docs/*.md")
	}
}

// kubectlWrite is a kubectl command line that writes.
var kubectlWrite = regexp.MustCompile(`^kubectl\s.*\s(apply|create|delete|patch|label|annotate|scale|replace|join|unjoin)\s`)

// dryRun adds --dry-run=server to every line of a dry-run block.
func dryRun(script string) (string, error) {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(script, "\n"), "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if !kubectlWrite.MatchString(line+" ") || strings.HasSuffix(line, "\\") {
			return "", fmt.Errorf("a dry-run block holds kubectl writes only, one to a line: %q", line)
		}
		out = append(out, line+" --dry-run=server")
	}
	return strings.Join(out, "\n") + "\n", nil
}

func TestReadBlocks(t *testing.T) {
	dir := t.TempDir()
	md := "# x\n\n<!-- doctest: fleet -->\n```sh\nkubectl get pods\n```\n\n" +
		"Run:\n\n   ```sh\n   echo hi\n   ```\n\n   ```text\n   hi\n   ```\n\n```text\nnot output\n```\n"
	path := filepath.Join(dir, "p.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readBlocks(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{
		{page: "p.md", mode: modeFleet, line: 4, script: "kubectl get pods\n"},
		{page: "p.md", mode: modeRun, line: 10, script: "echo hi\n", want: "hi\n"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{
		"<!-- doctest: sometimes -->\n```sh\nx\n```\n",
		"<!-- doctest: fleet -->\nwords\n```sh\nx\n```\n",
		"<!-- doctest: fleet -->\n```yaml\nx: 1\n```\n",
		"```sh\nnever closed\n",
	} {
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readBlocks(path); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestDryRun(t *testing.T) {
	got, err := dryRun("kubectl --context member1 apply --server-side -k deploy/overlays/member1\n\n")
	if err != nil || got != "kubectl --context member1 apply --server-side -k deploy/overlays/member1 --dry-run=server\n" {
		t.Errorf("got %q, %v", got, err)
	}
	for _, bad := range []string{"kubectl get pods\n", "echo x\n", "kubectl apply \\\n -f x\n"} {
		if _, err := dryRun(bad); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}
