//go:build lab

package containerd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// The containers run in network namespaces of their own, as pods do, not
// in the host's: the member Corefile serves port 53 and the health, ready
// and metrics ports on every address, which on this shared machine would
// take them from everyone else, and a fresh namespace keeps the kernel's
// default ip_unprivileged_port_start, so binding port 53 proves the
// capability. The test reaches in: it opens sockets inside a container's
// namespace to query it, and bridges the lab's API servers, which listen on
// the host's loopback, to the same addresses inside.

// netns is a container's network namespace, held open for the test.
type netns struct{ f *os.File }

// openNetns opens the network namespace of pid until the test ends.
func openNetns(t *testing.T, pid int) (*netns, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { f.Close() })
	return &netns{f}, nil
}

// do runs f on an OS thread moved into the namespace: the sockets f opens
// belong to it for good, as do the /proc/sys/net files f reads. It runs on
// a goroutine of its own, so that a thread that cannot move back ends with
// it (see inside) and the caller's goroutine never runs in the container's
// namespace.
func (n *netns) do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		errc <- n.inside(f)
	}()
	return <-errc
}

// inside is do's body, on a locked thread. It unlocks the thread once the
// thread is back in the test's namespace; one that cannot move back stays
// locked, and Go ends it with its goroutine rather than run anything else
// on it.
func (n *netns) inside(f func() error) error {
	host, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer host.Close()
	if err := unix.Setns(int(n.f.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering the container's network namespace: %w", err)
	}
	ferr := f()
	if err := unix.Setns(int(host.Fd()), unix.CLONE_NEWNET); err != nil {
		return errors.Join(ferr, fmt.Errorf("leaving the container's network namespace: %w", err))
	}
	runtime.UnlockOSThread()
	return ferr
}

// dial connects from inside the namespace.
func (n *netns) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// bridge listens on addr (host:port) inside the namespace and forwards each
// connection to addr in the test's namespace, until stop.
func (n *netns) bridge(addr string) (stop func(), err error) {
	var ln net.Listener
	if err := n.do(func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		return nil, fmt.Errorf("bridging %s into the container: %w", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { forward(ctx, in, addr) })
		}
	})
	return func() {
		cancel()
		ln.Close()
		wg.Wait()
	}, nil
}

// forward copies between in and a new connection to addr both ways, until
// either side closes or ctx ends; then it closes both.
func forward(ctx context.Context, in net.Conn, addr string) {
	defer in.Close()
	out, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	closeBoth := func() {
		in.Close()
		out.Close()
	}
	defer context.AfterFunc(ctx, closeBoth)()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, in)
		closeBoth()
		close(done)
	}()
	_, _ = io.Copy(in, out)
	closeBoth()
	<-done
}
