// Package labnet is the lab's network (test/lab/README.md, "The network")
// as make demo and the tests use it: a client on a cluster's node, whose
// connections to ClusterIPs that cluster's kube-proxy routes, and pods
// played on their addresses in the pods' network.
package labnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Netns is a network namespace, by the path of a file that holds it: a
// named one's under /run/netns, or a process's.
type Netns string

// Node is the network of cluster's node, where its kube-proxy runs.
func Node(cluster string) Netns { return Netns("/run/netns/mcs-lab-" + cluster) }

// Pods is the network where every cluster's pod addresses are played.
const Pods Netns = "/run/netns/mcs-lab-pods"

// Of is the network namespace of process pid, while it runs.
func Of(pid int) Netns { return Netns(fmt.Sprintf("/proc/%d/ns/net", pid)) }

// Check is nil when the lab whose state is in labDir (_output/lab) runs
// with its network, and else says why it does not.
func Check(labDir string) error {
	b, err := os.ReadFile(filepath.Join(labDir, "network"))
	if err != nil {
		return fmt.Errorf("the lab records no network (%v): make lab-down, then make lab-up as root", err)
	}
	if s := strings.TrimSpace(string(b)); s != "on" {
		return fmt.Errorf("the lab runs without its network and kube-proxy: %s", strings.TrimPrefix(s, "off: "))
	}
	return nil
}

// Do runs f on an OS thread that has joined the namespace: the sockets f
// makes belong to it, wherever they are used afterwards. The thread then
// returns to its own namespace and to Go's pool. It must not be discarded
// instead (a goroutine that exits locked ends its thread): a child process
// that another goroutine started from that thread with Pdeathsig, as
// test/process starts mcs-controller and coredns-mcs, would be signalled.
// Only when it cannot return does it stay locked, to be discarded.
func (n Netns) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(home)
		if err := n.join(); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		err = f()
		if unix.Setns(home, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// join moves the calling thread into the namespace.
func (n Netns) join() error {
	fd, err := unix.Open(string(n), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", n, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("joining network namespace %s: %w", n, err)
	}
	return nil
}

// Dial connects from inside the namespace.
func (n Netns) Dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	err = n.Do(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on addr inside the namespace.
func (n Netns) Listen(network, addr string) (ln net.Listener, err error) {
	err = n.Do(func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// HTTPClient sends each request from inside the namespace on a connection
// of its own, as a client that resolves and connects anew each time.
func (n Netns) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{DialContext: n.Dial, DisableKeepAlives: true}}
}

// IP runs ip with args in the namespace: a child forked from a thread in
// it starts there.
func (n Netns) IP(args ...string) error {
	return n.Do(func() error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s in %s: %v: %s", strings.Join(args, " "), n, err, strings.TrimSpace(string(out)))
		}
		return nil
	})
}

// Bridge listens on addr (host:port) inside the namespace and forwards each
// connection to addr outside it, until stop: a process in the namespace
// reaches a server that listens on the host's loopback at the same address.
func (n Netns) Bridge(addr string) (stop func(), err error) {
	ln, err := n.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bridging %s into %s: %w", addr, n, err)
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
