//go:build lab

package containerd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/labnet"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// daemon is a containerd of the test's own: root, state, socket and config
// in a temporary directory, so that it shares nothing with a containerd the
// machine may run. ctr talks to it.
type daemon struct {
	dir  string
	args []string // ctr's: the socket and the namespace
}

// config keeps what ctr images import and ctr run need. The CRI plugin is
// left out (it wants CNI and a network of its own), and so is opt, which
// would create /opt/containerd. Warnings and errors only: its log is shown
// when the test fails.
const config = `version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.grpc.v1.cri", "io.containerd.internal.v1.opt"]

[grpc]
  address = %[3]q

[ttrpc]
  address = "%[3]s.ttrpc"

[debug]
  level = "warn"
`

// ctrTimeout bounds one ctr command; an import of both images takes a second.
const ctrTimeout = time.Minute

// startContainerd starts containerd and waits until it answers; it is
// stopped when the test ends, after the containers.
func startContainerd(t *testing.T) *daemon {
	t.Helper()
	dir := t.TempDir()
	socket := filepath.Join(dir, "containerd.sock")
	conf := filepath.Join(dir, "config.toml")
	text := fmt.Sprintf(config, filepath.Join(dir, "root"), filepath.Join(dir, "state"), socket)
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	keepRunClean(t)
	p, err := process.Start(process.Config{
		Name: "containerd", Binary: "containerd", Args: []string{"--config", conf}, Log: filepath.Join(dir, "containerd.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	p.StopAtCleanup(t)
	d := &daemon{dir: dir, args: []string{"--address", socket, "--namespace", "coredns-mcs-test"}}
	answers := func(ctx context.Context) error {
		_, err := d.ctr(ctx, "version")
		return err
	}
	if err := p.WaitFor(t.Context(), 30*time.Second, answers); err != nil {
		t.Fatal(err)
	}
	return d
}

// keepRunClean removes /run/containerd when the test ends if the test
// made it: the shims put their sockets under /run/containerd/s whatever
// the state directory, and remove them when they exit.
func keepRunClean(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/run/containerd"); !errors.Is(err, fs.ErrNotExist) {
		return
	}
	t.Cleanup(func() {
		// Each fails, harmlessly, when something else has put files there since.
		_ = os.Remove("/run/containerd/s")
		_ = os.Remove("/run/containerd")
	})
}

// ctr runs ctr against the daemon and returns its output.
func (d *daemon) ctr(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, ctrTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "ctr", append(d.args, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// must is ctr that fails the test.
func (d *daemon) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.ctr(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// importImage imports the archive as ctr images import does on a node,
// and checks that containerd then holds img.ref at the digest the builder
// printed: the very image, unpacked into the snapshotter.
func (d *daemon) importImage(t *testing.T, img image) {
	t.Helper()
	d.must(t, "images", "import", img.archive)
	for line := range strings.Lines(d.must(t, "images", "ls")) {
		if f := strings.Fields(line); len(f) > 2 && f[0] == img.ref {
			if f[2] != img.digest {
				t.Fatalf("containerd holds %s at %s, the builder wrote %s", img.ref, f[2], img.digest)
			}
			return
		}
	}
	t.Fatalf("ctr images import %s: no %s in ctr images ls", img.archive, img.ref)
}

// spec is what the test reads of an OCI runtime spec.
type spec struct {
	Process struct {
		Capabilities struct {
			Bounding, Effective, Permitted, Inheritable, Ambient []string
		}
	}
}

// defaultCaps is the capability set of ctr's default spec, which is also
// what containerd's CRI plugin starts a Kubernetes container from.
func (d *daemon) defaultCaps(t *testing.T) []string {
	t.Helper()
	return d.spec(t, "oci", "spec").Process.Capabilities.Bounding
}

func (d *daemon) spec(t *testing.T, args ...string) spec {
	t.Helper()
	var s spec
	if err := json.Unmarshal([]byte(d.must(t, args...)), &s); err != nil {
		t.Fatalf("ctr %s: %v", strings.Join(args, " "), err)
	}
	return s
}

// container is a running container.
type container struct {
	d   *daemon
	id  string
	pid int    // of its process, in the test's PID namespace
	log string // its stdout and stderr
	net labnet.Netns
	// bridges stop once the container is removed: cutting its connections
	// before would only fill its log.
	bridges []func()
}

// run starts image ref as container id with ctr run's flags and the
// process's argv, in a network namespace of its own, and returns once its
// process runs.
//
// The containers run in network namespaces of their own, as pods do, not
// in the host's: the member Corefile serves port 53 and the health, ready
// and metrics ports on every address, which on this shared machine would
// take them from everyone else, and a fresh namespace keeps the kernel's
// default ip_unprivileged_port_start, so binding port 53 proves the
// capability. The test reaches in (labnet.Netns): it opens sockets inside a
// container's namespace to query it, and bridges the lab's API servers,
// which listen on the host's loopback, to the same addresses inside. The container is removed when the test ends, its output
// logged if the test failed.
func (d *daemon) run(t *testing.T, id, ref string, flags, argv []string) *container {
	t.Helper()
	c := &container{d: d, id: id, log: filepath.Join(d.dir, id+".log")}
	pidFile := filepath.Join(d.dir, id+".pid")
	// Before ctr run: a container that fails half way is removed too.
	t.Cleanup(func() { c.remove(t) })
	args := []string{
		"run", "--detach", "--log-uri", "file://" + c.log, "--pid-file", pidFile,
		// runc's state under the test's directory; no cgroup path, so runc
		// nests the container's cgroups under the shim's and removes them
		// with the container.
		"--runc-root", filepath.Join(d.dir, "runc"), "--cgroup", "",
	}
	args = append(append(append(args, flags...), ref, id), argv...)
	d.must(t, args...)
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	if c.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		t.Fatalf("%s: %v", pidFile, err)
	}
	c.net = labnet.Of(c.pid)
	if err := c.alive(); err != nil {
		t.Fatal(err)
	}
	return c
}

// remove kills the container's task and deletes it, then the container and
// its snapshot, and stops its bridges.
func (c *container) remove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), ctrTimeout)
	defer cancel()
	for _, args := range [][]string{{"tasks", "delete", "--force", c.id}, {"containers", "delete", c.id}} {
		if out, err := c.d.ctr(ctx, args...); err != nil && !strings.Contains(out, "not found") {
			t.Errorf("removing container %s: %v", c.id, err)
		}
	}
	for _, stop := range c.bridges {
		stop()
	}
	if t.Failed() {
		out, _ := os.ReadFile(c.log)
		t.Logf("container %s output (%s):\n%s", c.id, c.log, out)
	}
}

// bridge bridges addr into the container's network namespace (see
// labnet's Netns.Bridge) until the container is removed.
func (c *container) bridge(t *testing.T, addr string) {
	t.Helper()
	stop, err := c.net.Bridge(addr)
	if err != nil {
		t.Fatal(err)
	}
	c.bridges = append(c.bridges, stop)
}

// alive is nil while the container's process runs.
func (c *container) alive() error {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.pid))
	// pid (comm) state …; a zombie has exited too, its shim has not reaped it yet.
	if err != nil || strings.HasPrefix(strings.TrimSpace(string(b[bytes.LastIndexByte(b, ')')+1:])), "Z") {
		return fmt.Errorf("container %s has exited: its output is below", c.id)
	}
	return nil
}
