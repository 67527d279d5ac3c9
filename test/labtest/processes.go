package labtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// Binary is bin/name of the repository, which make build writes.
func (l *Lab) Binary(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(l.root, "bin", name)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%v; run make build", err)
	}
	return path
}

// StartController starts the mcs-controller binary with args and
// --http-address on a free loopback port, which it returns, and stops it
// when the test ends. It does not wait: wait with
// process.HTTPOK("http://"+addr+"/readyz").
func StartController(t testing.TB, binary string, args ...string) (p *process.Process, addr string) {
	t.Helper()
	ports, err := loopback.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err = process.Start(process.Config{
		Name:   "mcs-controller",
		Binary: binary,
		Log:    filepath.Join(t.TempDir(), "mcs-controller.log"),
		Args:   append(slices.Clone(args), "--http-address", addr),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.StopAtCleanup(t)
	return p, addr
}

// memberCorefile is a member's mcs stanza of corefile/Corefile above the
// kubernetes plugin with that Corefile's labels line, on loopback ports,
// both connecting with a kubeconfig in place of the in-cluster account.
const memberCorefile = `cluster.local:%[1]d clusterset.local:%[1]d {
    bind 127.0.0.1
    errors
    ready 127.0.0.1:%[2]d
    mcs cluster.local clusterset.local {
        kubeconfig %[3]s %[4]s
        cluster %[4]s
    }
    kubernetes cluster.local {
        kubeconfig %[3]s %[4]s
        labels endpointslice.kubernetes.io/managed-by notin (mcs-controller.coredns-mcs.io)
    }
}
`

// StartMemberDNS runs the coredns-mcs binary as member's CoreDNS, with
// the member overlays' Corefile (answer vip) on loopback ports and
// kubeconfig's context member, waits up to timeout until it is ready, and
// returns its DNS address; it stops when the test ends.
func StartMemberDNS(t testing.TB, binary, kubeconfig, member string, timeout time.Duration) string {
	t.Helper()
	return RunMemberDNS(t, binary, kubeconfig, member, timeout).Addr
}

// MemberDNS is a coredns-mcs process serving as a member's CoreDNS.
type MemberDNS struct {
	Addr     string // its DNS address
	cfg      process.Config
	readyURL string

	restart sync.Mutex // one Restart at a time
	mu      sync.Mutex
	p       *process.Process
	starts  int
}

// RunMemberDNS is StartMemberDNS, returning the process for a test that
// needs it: to read its memory, to kill it and start it again.
func RunMemberDNS(t testing.TB, binary, kubeconfig, member string, timeout time.Duration) *MemberDNS {
	t.Helper()
	dir := t.TempDir()
	d := &MemberDNS{}
	p, ports, err := process.StartCoreDNSOnFreePorts(t.Context(), 2, timeout, func(ports []int) (process.Config, string, error) {
		corefile := filepath.Join(dir, "Corefile")
		err := os.WriteFile(corefile, fmt.Appendf(nil, memberCorefile, ports[0], ports[1], kubeconfig, member), 0o644)
		d.cfg = process.CoreDNS("coredns-mcs "+member, binary, corefile, filepath.Join(dir, "coredns.log"))
		return d.cfg, fmt.Sprintf("127.0.0.1:%d", ports[0]), err
	})
	if err != nil {
		t.Fatal(err)
	}
	p.StopAtCleanup(t)
	d.p, d.Addr, d.readyURL = p, fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("http://127.0.0.1:%d/ready", ports[1])
	if err := p.WaitFor(t.Context(), timeout, process.CoreDNSReady(d.Addr, d.readyURL)); err != nil {
		t.Fatal(err)
	}
	return d
}

// Pid is the process id of the one running now.
func (d *MemberDNS) Pid() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.p.Pid()
}

// Log is the log file of the one running now.
func (d *MemberDNS) Log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.p.Log()
}

// Restart SIGKILLs the process, as a crash or an OOM kill ends a
// container, and starts it again at once on the same ports, as a kubelet
// restarts one, then waits up to timeout until it is ready. The new one
// logs to a file of its own beside the first (coredns-<n>.log), so that
// the killed one's log stays.
func (d *MemberDNS) Restart(t testing.TB, timeout time.Duration) error {
	d.restart.Lock()
	defer d.restart.Unlock()
	d.mu.Lock()
	old := d.p
	d.starts++
	cfg := d.cfg
	cfg.Log = strings.TrimSuffix(cfg.Log, ".log") + fmt.Sprintf("-%d.log", d.starts)
	d.mu.Unlock()
	old.Kill()
	p, err := process.Start(cfg)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.p = p
	d.mu.Unlock()
	p.StopAtCleanup(t)
	return p.WaitFor(t.Context(), timeout, process.CoreDNSReady(d.Addr, d.readyURL))
}
