package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// The lab's network: what lets a packet sent to a Service's ClusterIP reach
// a pod address, through a real kube-proxy, without touching the machine's
// own network. Each cluster's node is a network namespace of its own, where
// its kube-proxy programs nftables, and every pod address of every cluster
// is bound by whoever plays the pod (make demo, a test) in one more
// namespace, the pods' network. A veth pair joins each node to the pods'
// network, and a node routes 10.0.0.0/8 (every pod and service CIDR of
// the lab) there:
//
//	node netns mcs-lab-<cluster>                        netns mcs-lab-pods
//	  kube-proxy, clients                                 pod addresses on lo
//	  eth0 172.30.<i>.2/30  <------ veth ------>  to-<cluster> 172.30.<i>.1/30
//	  10.0.0.0/8 via 172.30.<i>.1
//
// Nothing leaves these namespaces: the pods' network has no route but its
// links, and the nodes have none but 10.0.0.0/8 and their link. A node's
// kube-proxy reaches its apiserver on the host's loopback through labctl,
// which forwards the apiserver's address inside the node (nodeproxy.go).
// Making namespaces needs root; without it the lab runs without kube-proxy
// and says so in networkFile.

const (
	netnsPrefix = "mcs-lab-"
	podsNetns   = netnsPrefix + "pods"
	// labRoutes is where nodes send what is not theirs: the pod and service
	// CIDRs of every cluster.
	labRoutes = "10.0.0.0/8"
)

func nodeNetns(c cluster) string { return netnsPrefix + c.name }

// link is c's veth pair: the pods' side and the node's side addresses.
func link(c cluster) (pods, node string) {
	i := clusterIndex(c)
	return fmt.Sprintf("172.30.%d.1", i), fmt.Sprintf("172.30.%d.2", i)
}

func clusterIndex(c cluster) int {
	for i, o := range clusters {
		if o.name == c.name {
			return i
		}
	}
	panic("labctl: unknown cluster " + c.name)
}

// networkFile records whether the lab has its network: "on", or "off: " and
// why. labtest reads it to say what a test skips.
func (l *lab) networkFile() string { return filepath.Join(l.dir, "network") }

// withNetwork is nil when this labctl can make the lab's network.
func withNetwork() error {
	if os.Geteuid() != 0 {
		return errors.New("network namespaces need root")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (Debian's iproute2 and nftables)", tool)
		}
	}
	return nil
}

// hasNetwork tells whether the lab was started with its network.
func (l *lab) hasNetwork() bool {
	b, err := os.ReadFile(l.networkFile())
	return err == nil && strings.TrimSpace(string(b)) == "on"
}

// netUp makes the namespaces, links and routes, replacing what a lab that
// died left. It records the outcome in networkFile.
func (l *lab) netUp() error {
	if err := withNetwork(); err != nil {
		fmt.Printf("no kube-proxy in this lab: %v; tests that send traffic to ClusterIPs skip\n", err)
		return os.WriteFile(l.networkFile(), []byte("off: "+err.Error()+"\n"), 0o644)
	}
	if err := netDown(); err != nil {
		return err
	}
	cmds := [][]string{{"netns", "add", podsNetns}, {"-n", podsNetns, "link", "set", "lo", "up"}}
	for _, c := range clusters {
		node, podsEnd := nodeNetns(c), "to-"+c.name
		podsIP, nodeIP := link(c)
		cmds = append(cmds,
			[]string{"netns", "add", node},
			[]string{"-n", node, "link", "set", "lo", "up"},
			[]string{"-n", node, "link", "add", "eth0", "type", "veth", "peer", "name", podsEnd, "netns", podsNetns},
			[]string{"-n", node, "addr", "add", nodeIP + "/30", "dev", "eth0"},
			[]string{"-n", node, "link", "set", "eth0", "up"},
			[]string{"-n", podsNetns, "addr", "add", podsIP + "/30", "dev", podsEnd},
			[]string{"-n", podsNetns, "link", "set", podsEnd, "up"},
			[]string{"-n", node, "route", "add", labRoutes, "via", podsIP},
		)
	}
	for _, args := range cmds {
		if err := ip(args...); err != nil {
			return errors.Join(err, netDown())
		}
	}
	// Nodes forward their pods' packets, and the pods' network what one
	// cluster's pod sends to another's (pod.go).
	for _, ns := range append(nodeNamespaces(), podsNetns) {
		if err := inNetns(ns, func() error { return os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644) }); err != nil {
			return errors.Join(err, netDown())
		}
	}
	return os.WriteFile(l.networkFile(), []byte("on\n"), 0o644)
}

func nodeNamespaces() []string {
	var names []string
	for _, c := range clusters {
		names = append(names, nodeNetns(c))
	}
	return names
}

// netDown deletes every namespace of the lab; their links go with them.
func netDown() error {
	names, err := os.ReadDir("/run/netns")
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, n := range names {
		if strings.HasPrefix(n.Name(), netnsPrefix) {
			if err := ip("netns", "delete", n.Name()); err != nil {
				return err
			}
		}
	}
	return nil
}

func ip(args ...string) error {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// inNetns runs f on an OS thread that has joined the named namespace, so
// the sockets f makes belong to it wherever they are used afterwards. The
// thread then returns to its own namespace and to Go's pool, as
// test/labnet's Netns.Do does and for the same reason (a discarded thread
// signals the children it started with Pdeathsig); only when it cannot
// return does it stay locked, to be discarded.
func inNetns(name string, f func() error) error {
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
		if err := setns(filepath.Join("/run/netns", name)); err != nil {
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

// setns moves the calling thread into the network namespace at path.
func setns(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("joining network namespace %s: %w", path, err)
	}
	return nil
}

// dialIn is a dialer from inside the named namespace.
func dialIn(name string) func(network, addr string) (net.Conn, error) {
	return func(network, addr string) (c net.Conn, err error) {
		err = inNetns(name, func() (err error) {
			c, err = net.Dial(network, addr)
			return err
		})
		return c, err
	}
}
