package labnet

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"golang.org/x/sys/unix"
)

// Do runs f inside the namespace, and gives its thread back to Go's pool
// in its own namespace rather than ending it: a thread that ends signals
// the children started from it with Pdeathsig (the lab tests' controller
// and CoreDNS processes).
func TestDoKeepsItsThread(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root (CI runs as root)")
	}
	name := fmt.Sprintf("labnet-test-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "delete", name).Run() })
	n := Netns("/run/netns/" + name)
	home, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}

	var tid int
	var inside string
	if err := n.Do(func() (err error) {
		tid = unix.Gettid()
		inside, err = os.Readlink("/proc/thread-self/ns/net")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if inside == home {
		t.Fatalf("f ran in the test's own namespace %s", home)
	}
	after, err := os.Readlink(fmt.Sprintf("/proc/self/task/%d/ns/net", tid))
	if err != nil {
		t.Fatalf("the thread that ran f is gone: %v", err)
	}
	if after != home {
		t.Errorf("the thread that ran f is in %s, want %s, its own", after, home)
	}
}
