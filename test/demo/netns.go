package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// netns is a network namespace of the demo's own, where pod addresses
// (10.x, which the lab does not route) are bound and called. A child
// process made in it holds it; the kernel kills the child when the demo
// ends, and the namespace goes with it.
type netns struct {
	holder *exec.Cmd
	fd     int // of /proc/<holder>/ns/net
}

// newNetns makes the namespace with its loopback interface up. It needs
// CAP_SYS_ADMIN (root) and ip from iproute2.
func newNetns() (*netns, error) {
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, fmt.Errorf("ip (Debian's iproute2) is needed to bind pod addresses: %w", err)
	}
	holder := exec.Command("sleep", "infinity")
	holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := holder.Start(); err != nil {
		return nil, fmt.Errorf("making a network namespace (needs CAP_SYS_ADMIN, e.g. root): %w", err)
	}
	n := &netns{holder: holder, fd: -1}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/ns/net", holder.Process.Pid), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("opening the network namespace: %w", err)
	}
	n.fd = fd
	if err := n.ip("link", "set", "lo", "up"); err != nil {
		n.close()
		return nil, err
	}
	return n, nil
}

// do runs f on an OS thread that has joined the namespace: the sockets f
// makes belong to it, wherever they are used afterwards. The thread is
// never unlocked, so Go discards it when f returns and nothing else runs
// in the namespace by accident.
func (n *netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(n.fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("joining the network namespace: %w", err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// ip runs ip with args in the namespace: a child forked by a thread in it
// starts there.
func (n *netns) ip(args ...string) error {
	return n.do(func() error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s in the demo's network namespace: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	})
}

// listen opens a TCP listener on addr in the namespace.
func (n *netns) listen(addr string) (net.Listener, error) {
	var ln net.Listener
	err := n.do(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// httpClient sends requests from inside the namespace, one connection
// each.
func (n *netns) httpClient() *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := n.do(func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Timeout: time.Second, Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

func (n *netns) close() {
	if n.fd >= 0 {
		_ = unix.Close(n.fd)
	}
	_ = n.holder.Process.Kill()
	_ = n.holder.Wait()
}
