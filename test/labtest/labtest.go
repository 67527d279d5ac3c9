// Package labtest gives tests the local multi-cluster lab of test/lab: the
// clusters hub, member1, member2 and member3, each a real control plane
// with kwok playing one node.
//
// A package's TestMain calls Main. When a lab is already up (make lab-up)
// its tests use it and leave it running; otherwise Main builds the lab's
// binaries if needed, starts the lab, and stops it once the package's tests
// are done, also when the test binary is interrupted, panics or times out.
// Packages share no lab concurrently: run them with go test -p 1.
//
// Lab tests carry the build tag lab, so that go test ./... runs unit tests
// only and go test -tags lab -p 1 ./... runs the lab tests too.
package labtest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Cluster names, which are also the contexts of the lab's kubeconfig.
const (
	Hub     = "hub"
	Member1 = "member1"
	Member2 = "member2"
	Member3 = "member3"
)

var (
	// Clusters are all clusters of the lab.
	Clusters = []string{Hub, Member1, Member2, Member3}
	// Members are the clusters that run workloads.
	Members = []string{Member1, Member2, Member3}
)

// current is the lab of this test binary, set by Main.
var current *Lab

// Main runs the package's tests against the lab; call it from TestMain.
func Main(m *testing.M) {
	os.Exit(run(m))
}

// NoLab, set in a test process's environment, makes Main run its tests
// without the lab: the process is one that a test started to run one unit
// test of the package alone (hostilemember.Alone), and its parent holds
// the lab.
const NoLab = "LABTEST_NO_LAB"

func run(m *testing.M) int {
	if os.Getenv(NoLab) != "" {
		return m.Run()
	}
	l, err := setUp()
	if err != nil {
		fmt.Fprintf(os.Stderr, "labtest: %v\n", err)
		return 1
	}
	current = l
	code := m.Run()
	if err := l.tearDown(); err != nil {
		fmt.Fprintf(os.Stderr, "labtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Get returns the lab; the package's TestMain must have called Main.
func Get(t testing.TB) *Lab {
	t.Helper()
	if current == nil {
		t.Fatal("labtest: no lab; the package's TestMain must call labtest.Main(m)")
	}
	return current
}

// setUp attaches to a running lab or starts one.
func setUp() (*Lab, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	l := newLab(root)
	if err := l.waitForOtherOwner(); err != nil {
		return nil, err
	}
	// Whether the lab runs is what labctl's records say, not whether its API
	// servers answer in time: a busy machine can fail one readiness check,
	// and a test binary that took a running lab for a stopped one would
	// stop it for everyone when it ends.
	if l.running() {
		if err := l.waitHealthy(); err != nil {
			return nil, err
		}
		fmt.Fprintln(os.Stderr, "labtest: using the running lab; it stays up")
		return l, nil
	}
	if err := l.start(); err != nil {
		return nil, err
	}
	return l, nil
}

// running reports whether labctl finds every component of the lab alive.
func (l *Lab) running() bool {
	return exec.Command(l.labctl(), "status").Run() == nil
}

// healthyTimeout bounds the wait for a running lab's API servers to answer.
const healthyTimeout = time.Minute

// waitHealthy waits until every API server of the running lab is ready.
func (l *Lab) waitHealthy() error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, healthyTimeout, true, func(context.Context) (bool, error) {
		last = l.healthy()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("the running lab is not healthy within %s: %w", healthyTimeout, last)
	}
	return nil
}

// repoRoot walks up from the working directory, which go test sets to the
// package's directory, to the directory holding test/lab/go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "test", "lab", "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no test/lab/go.mod above the working directory")
		}
		dir = parent
	}
}

// start builds the binaries when needed, starts the lab and hands it to a
// watcher: labctl watch stops the lab once its standard input, a pipe whose
// write end only this process holds, is closed. The kernel closes it however
// this process ends, so a panic, a test timeout or a signal stops the lab too.
func (l *Lab) start() error {
	build := exec.Command("bash", filepath.Join(l.root, "test", "lab", "build.sh"))
	if err := runVisible(build); err != nil {
		return fmt.Errorf("building the lab's binaries: %w", err)
	}
	if err := runVisible(exec.Command(l.labctl(), "up")); err != nil {
		return fmt.Errorf("starting the lab: %w", err)
	}
	logFile, err := os.Create(l.watchLog())
	if err != nil {
		return err
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	watch := exec.Command(l.labctl(), "watch")
	watch.Stdin = r
	watch.Stdout = logFile
	watch.Stderr = logFile
	// Its own session keeps a Ctrl-C in the terminal from killing the
	// watcher before it has stopped the lab.
	watch.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := watch.Start(); err != nil {
		w.Close()
		return fmt.Errorf("starting labctl watch: %w", err)
	}
	l.watch, l.watchPipe = watch, w
	return nil
}

// tearDown stops the lab if this process started it, and waits until the
// watcher has stopped it, so that the next package finds no lab.
func (l *Lab) tearDown() error {
	if l.watch == nil {
		return nil
	}
	l.watchPipe.Close()
	if err := l.watch.Wait(); err != nil {
		return fmt.Errorf("stopping the lab: %v; see %s", err, l.watchLog())
	}
	fmt.Fprintln(os.Stderr, "labtest: lab stopped")
	return nil
}

// waitForOtherOwner waits while the watcher of another test binary, one
// that has just ended, is still stopping the lab it started: the watcher
// holds a lock until it is done.
func (l *Lab) waitForOtherOwner() error {
	f, err := os.OpenFile(l.watchLock(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return fmt.Errorf("another test run owns the lab (%s is locked): %w; run go test with -p 1",
				l.watchLock(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// healthy checks that the kubeconfig is there and every apiserver is ready.
func (l *Lab) healthy() error {
	for _, c := range Clusters {
		cfg, err := l.restConfig(c)
		if err != nil {
			return err
		}
		cfg.Timeout = 2 * time.Second
		client, err := rest.HTTPClientFor(cfg)
		if err != nil {
			return err
		}
		resp, err := client.Get(cfg.Host + "/readyz")
		if err != nil {
			return fmt.Errorf("cluster %s: %w", c, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("cluster %s: /readyz: %s", c, resp.Status)
		}
	}
	return nil
}

func (l *Lab) restConfig(cluster string) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: l.kubeconfig}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: cluster}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("cluster %s in %s: %w", cluster, l.kubeconfig, err)
	}
	return cfg, nil
}

// out is a path under _output, which holds the lab's binaries and state.
func (l *Lab) out(elem ...string) string {
	return filepath.Join(append([]string{l.root, "_output"}, elem...)...)
}

func (l *Lab) labctl() string    { return l.out("bin", "labctl") }
func (l *Lab) watchLock() string { return l.out(".lab-watch.lock") }
func (l *Lab) watchLog() string  { return l.out("lab", "logs", "watch.log") }

// runVisible runs cmd with its output in the test binary's stderr.
func runVisible(cmd *exec.Cmd) error {
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	return cmd.Run()
}
