//go:build lab

package conformance

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The suite's upstream source: MCS_API_CONFORMANCE, else beside the
// repository's clone.
const (
	sourceEnv      = "MCS_API_CONFORMANCE"
	defaultSource  = "../shared/mcs-api-conformance" // from the repository's root
	upstreamRepo   = "https://github.com/kubernetes-sigs/mcs-api"
	upstreamCommit = "ded161af6ea9596cd9e878c61ed4f4e8d5cf8401"
	// mcsAPI is the published sigs.k8s.io/mcs-api the suite is built
	// against, in place of its go.mod's replace by the upstream tree.
	mcsAPI = "sigs.k8s.io/mcs-api@v0.5.2"
)

// Files the suite writes into its working directory, and the binary.
const (
	suiteReport  = "report.yaml"
	ginkgoReport = "ginkgo-report.json"
	suiteBinary  = "mcs-conformance.test"
	suiteStamp   = ".mcs-conformance.stamp"
)

// suiteSource is the directory holding the suite's conformance/ and
// LICENSE; without it the test fails, saying where to get it.
func suiteSource(t *testing.T, root string) string {
	t.Helper()
	dir, from := os.Getenv(sourceEnv), sourceEnv
	if dir == "" {
		dir, from = filepath.Join(root, defaultSource), sourceEnv+" unset: the default, beside the clone"
	}
	for _, want := range []string{"conformance/go.mod", "LICENSE"} {
		if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
			t.Fatalf("the MCS API conformance suite is not at %s (%s): %v\n"+
				"get it with git clone %s && git -C mcs-api checkout %s, then point at it: %s=$PWD/mcs-api make conformance "+
				"(docs/conformance.md)", dir, from, err, upstreamRepo, upstreamCommit, sourceEnv)
		}
	}
	return dir
}

// buildSuite builds the suite's test binary into out, as the suite's own
// build says (its module against the published mcs-api), and returns its
// path. It is built again only when the suite's source, the mcs-api
// version or Go changed: the stamp beside it holds their hash.
func buildSuite(t *testing.T, root, out string) string {
	t.Helper()
	src := filepath.Join(suiteSource(t, root), "conformance")
	goVersion, err := exec.Command("go", "version").Output()
	if err != nil {
		t.Fatalf("go version: %v", err)
	}
	key, err := hashTree(src, mcsAPI, string(goVersion))
	if err != nil {
		t.Fatal(err)
	}
	bin, stamp := filepath.Join(out, suiteBinary), filepath.Join(out, suiteStamp)
	if b, err := os.ReadFile(stamp); err == nil && string(b) == key {
		if _, err := os.Stat(bin); err == nil {
			t.Logf("the suite from %s is built already: %s", src, bin)
			return bin
		}
	}
	_ = os.Remove(stamp)
	scratch := filepath.Join(out, "src")
	if err := os.RemoveAll(scratch); err != nil {
		t.Fatal(err)
	}
	// Writable whatever the modes of the shared copy, which is read-only.
	if err := os.CopyFS(scratch, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	t.Logf("building the suite from %s in %s", src, scratch)
	for _, args := range [][]string{
		{"mod", "edit", "-dropreplace", "sigs.k8s.io/mcs-api", "-require", mcsAPI},
		{"mod", "tidy"},
		{"test", "-c", "-o", bin + ".new", "."},
	} {
		cmd := exec.CommandContext(t.Context(), "go", args...)
		cmd.Dir = scratch
		// Its own module, not this one's workspace; -mod=mod lets go
		// fill in go.sum from the module proxy.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod"))
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the suite: go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	if err := os.Rename(bin+".new", bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stamp, []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	return bin
}

// hashTree hashes every regular file under dir, by its path and content,
// and extra.
func hashTree(dir string, extra ...string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(b))
		h.Write(b)
		return nil
	})
	for _, e := range extra {
		fmt.Fprintf(h, "%s\x00", e)
	}
	return hex.EncodeToString(h.Sum(nil)), err
}
