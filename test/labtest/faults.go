package labtest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// The faults below act on the shared lab: keep them as short as the test
// needs. Lab tests must not run in parallel with them.

// Freeze stops (SIGSTOP) component (kube-apiserver, etcd, …) of cluster, as
// a hung server or a cut network would: its connections stay open and
// nothing answers. It returns thaw (SIGCONT), which the test's cleanup also
// calls, so the shared lab is never left frozen.
func (l *Lab) Freeze(t testing.TB, cluster, component string) (thaw func()) {
	t.Helper()
	pid := l.out("lab", "run", cluster+"-"+component+".pid")
	if err := process.SignalPIDFile(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("labtest: freezing %s %s: %v", cluster, component, err)
	}
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if err := process.SignalPIDFile(pid, syscall.SIGCONT); err != nil {
				t.Errorf("labtest: thawing %s %s: %v", cluster, component, err)
			}
		})
	}
	t.Cleanup(thaw)
	return thaw
}

// Stop stops component (kube-apiserver, …) of cluster, as an upgrade or a
// crash would: its connections close and new ones are refused. It returns
// start, which starts it again with the same arguments and data and returns
// once it is ready; the test's cleanup also calls it. labctl hold does the
// work and starts the component again when the test binary's pipe to it
// closes, so even a test binary that dies leaves the shared lab whole.
func (l *Lab) Stop(t testing.TB, cluster, component string) (start func()) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	var stderr bytes.Buffer
	hold := exec.Command(l.labctl(), "hold", cluster, component)
	hold.Stdin, hold.Stdout, hold.Stderr = r, outW, &stderr
	// Its own session keeps a Ctrl-C in the terminal from killing it
	// before it has started the component again.
	hold.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = hold.Start()
	r.Close()
	outW.Close()
	if err != nil {
		w.Close()
		outR.Close()
		t.Fatalf("labtest: labctl hold %s %s: %v", cluster, component, err)
	}
	line, _ := bufio.NewReader(outR).ReadString('\n')
	if line != cluster+" "+component+" stopped\n" {
		w.Close()
		_ = hold.Wait()
		outR.Close()
		t.Fatalf("labtest: stopping %s %s: %s", cluster, component, strings.TrimSpace(stderr.String()))
	}
	var once sync.Once
	start = func() {
		once.Do(func() {
			w.Close()
			err := hold.Wait()
			outR.Close()
			if err != nil {
				t.Errorf("labtest: starting %s %s again: %v: %s", cluster, component, err, strings.TrimSpace(stderr.String()))
			}
		})
	}
	t.Cleanup(start)
	return start
}
