//go:build lab

package containerd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
)

// checkProcess compares what the kernel says of the container's process,
// and what containerd asked runc for, with what its manifest wants: its
// user, its capabilities (only those of the manifest, and raised only by
// its entrypoint's file capability: none inheritable, none ambient), no new
// privileges, seccomp and a read-only root.
func checkProcess(t *testing.T, c *container, expect expected, entrypoint string) {
	t.Helper()
	status := procStatus(t, c.pid)
	for key, id := range map[string]int{"Uid": expect.uid, "Gid": expect.gid} {
		got := strings.Fields(status[key])
		if len(got) != 4 || slices.ContainsFunc(got, func(f string) bool { return f != strconv.Itoa(id) }) {
			t.Errorf("%s: %s %v, want %d four times (real, effective, saved, filesystem)", c.id, key, got, id)
		}
	}
	checkCaps(t, c, status, expect.caps, entrypoint)
	for key, want := range map[string]string{"NoNewPrivs": flag(expect.noNewPrivs, "1", "0"), "Seccomp": flag(expect.seccomp, "2", "0")} {
		if status[key] != want {
			t.Errorf("%s: %s %s, want %s", c.id, key, status[key], want)
		}
	}
	if ro := rootReadOnly(t, c.pid); ro != expect.readOnly {
		t.Errorf("%s: root filesystem read-only %t, want %t", c.id, ro, expect.readOnly)
	}
}

// checkCaps checks the capabilities: containerd's spec names exactly caps
// for the bounding, permitted and effective sets; the kernel shows as many
// in each, none inheritable or ambient; and the entrypoint's file
// capability raises exactly the bounding set. With a non-root user, a file
// capability is the only way a capability becomes effective at exec, so
// what the process can do beyond an ordinary user, it can by the image's
// file capability within what the manifest leaves it.
func checkCaps(t *testing.T, c *container, status map[string]string, caps []string, entrypoint string) {
	t.Helper()
	s := c.d.spec(t, "containers", "info", "--spec", c.id).Process.Capabilities
	for set, names := range map[string][]string{"bounding": s.Bounding, "permitted": s.Permitted, "effective": s.Effective} {
		if !slices.Equal(slices.Sorted(slices.Values(names)), caps) {
			t.Errorf("%s: containerd's spec has %s capabilities %v, want %v", c.id, set, names, caps)
		}
	}
	if len(s.Inheritable)+len(s.Ambient) > 0 {
		t.Errorf("%s: containerd's spec has inheritable %v and ambient %v capabilities, want none", c.id, s.Inheritable, s.Ambient)
	}
	mask := map[string]uint64{}
	for _, key := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		v, err := strconv.ParseUint(status[key], 16, 64)
		if err != nil {
			t.Fatalf("%s: /proc status %s %q: %v", c.id, key, status[key], err)
		}
		mask[key] = v
	}
	if n := bits.OnesCount64(mask["CapBnd"]); n != len(caps) {
		t.Errorf("%s: CapBnd %016x holds %d capabilities, want %d: %v", c.id, mask["CapBnd"], n, len(caps), caps)
	}
	if mask["CapInh"]|mask["CapAmb"] != 0 {
		t.Errorf("%s: CapInh %016x, CapAmb %016x, want none", c.id, mask["CapInh"], mask["CapAmb"])
	}
	file, effective := fileCaps(t, fmt.Sprintf("/proc/%d/root%s", c.pid, entrypoint))
	if file != mask["CapBnd"] || (file != 0 && !effective) {
		t.Errorf("%s: %s's file capability raises %016x (effective %t), want exactly the bounding set %016x", c.id, entrypoint, file, effective, mask["CapBnd"])
	}
	if mask["CapPrm"] != mask["CapBnd"] || mask["CapEff"] != mask["CapBnd"] {
		t.Errorf("%s: CapPrm %016x, CapEff %016x, want the bounding set %016x", c.id, mask["CapPrm"], mask["CapEff"], mask["CapBnd"])
	}
}

// vfsCapFlagsEffective is linux/capability.h's VFS_CAP_FLAGS_EFFECTIVE:
// the file's permitted capabilities become effective at exec.
const vfsCapFlagsEffective = 0x000001

// fileCaps is the permitted set and the effective flag of path's file
// capability (the security.capability attribute that setcap writes);
// none when it has none.
func fileCaps(t *testing.T, path string) (permitted uint64, effective bool) {
	t.Helper()
	b := make([]byte, 64)
	n, err := unix.Getxattr(path, "security.capability", b)
	if errors.Is(err, unix.ENODATA) {
		return 0, false
	}
	if err != nil {
		t.Fatalf("security.capability of %s: %v", path, err)
	}
	// struct vfs_cap_data, revision 2 or 3: magic_etc, then the low and the
	// high word of permitted and of inheritable, interleaved.
	if n < 20 {
		t.Fatalf("security.capability of %s: %d bytes, want revision 2 or 3", path, n)
	}
	le := binary.LittleEndian
	permitted = uint64(le.Uint32(b[4:])) | uint64(le.Uint32(b[12:]))<<32
	return permitted, le.Uint32(b)&vfsCapFlagsEffective != 0
}

// procStatus is /proc/<pid>/status by key.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			status[k] = strings.TrimSpace(v)
		}
	}
	return status
}

// rootReadOnly reports whether the process's root is mounted read-only.
func rootReadOnly(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		t.Fatal(err)
	}
	// ID, parent ID, major:minor, root, mount point, mount options, …
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) > 5 && f[4] == "/" {
			return slices.Contains(strings.Split(f[5], ","), "ro")
		}
	}
	t.Fatalf("no root mount in /proc/%d/mountinfo", pid)
	return false
}

// bound reports whether the network namespace of pid has a socket of uid
// on port: listening for TCP, unconnected for UDP, over IPv4 or IPv6.
func bound(t *testing.T, pid int, proto corev1.Protocol, port int32, uid int) bool {
	t.Helper()
	// The states of include/net/tcp_states.h: TCP_LISTEN, and TCP_CLOSE,
	// which is an unconnected UDP socket's.
	files, state := []string{"tcp", "tcp6"}, "0A"
	if proto == corev1.ProtocolUDP {
		files, state = []string{"udp", "udp6"}, "07"
	}
	suffix := fmt.Sprintf(":%04X", port)
	for _, f := range files {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, f))
		if err != nil {
			t.Fatal(err)
		}
		// sl, local_address, rem_address, st, tx_queue:rx_queue, tr:tm->when, retrnsmt, uid, …
		for line := range strings.Lines(string(b)) {
			if s := strings.Fields(line); len(s) > 7 && strings.HasSuffix(s[1], suffix) && s[3] == state && s[7] == strconv.Itoa(uid) {
				return true
			}
		}
	}
	return false
}

// unprivilegedPortStart is net.ipv4.ip_unprivileged_port_start in the
// container's network namespace: binding a lower port takes
// CAP_NET_BIND_SERVICE.
func unprivilegedPortStart(t *testing.T, c *container) int {
	t.Helper()
	var b []byte
	err := c.net.Do(func() (err error) {
		b, err = os.ReadFile("/proc/sys/net/ipv4/ip_unprivileged_port_start")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func flag(on bool, yes, no string) string {
	if on {
		return yes
	}
	return no
}
