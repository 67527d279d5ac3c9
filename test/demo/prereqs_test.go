package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make demo names every missing tool, with its Debian package, before it
// builds anything; with them all, as root, it goes on.
func TestPrereqs(t *testing.T) {
	bin := t.TempDir()
	for _, tool := range []string{"bash", "id"} { // what the check itself runs
		path, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(filepath.Join(bin, "bash"), "prereqs.sh")
	cmd.Env = []string{"PATH=" + bin}
	out, err := cmd.CombinedOutput()
	want := "make demo needs: dig (Debian's bind9-dnsutils) ip (Debian's iproute2) nft (Debian's nftables) conntrack (Debian's conntrack)"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("with none of the tools: %v, %q; want a failure saying %q", err, out, want)
	}

	if os.Geteuid() != 0 {
		t.Skip("the rest needs root (CI runs as root)")
	}
	for _, tool := range []string{"dig", "ip", "nft", "conntrack"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing here: .ci/run installs it", tool)
		}
	}
	if out, err := exec.Command("bash", "prereqs.sh").CombinedOutput(); err != nil {
		t.Errorf("with every tool, as root: %v, %s", err, out)
	}
}
