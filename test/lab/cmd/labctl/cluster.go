package main

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
)

// cluster is one control plane of the lab. Every component of a cluster
// binds to the cluster's own loopback address (Linux routes all of 127/8 to
// lo), so the four clusters use the same well-known ports without
// colliding with each other or with anything on 127.0.0.1.
type cluster struct {
	name        string
	ip          string
	podCIDR     string
	serviceCIDR string
	member      bool
}

// clusters are the lab's clusters; their pod and service CIDRs do not
// overlap so that addresses name their cluster.
var clusters = []cluster{
	{name: "hub", ip: "127.0.10.1", podCIDR: "10.20.0.0/16", serviceCIDR: "10.21.0.0/16"},
	{name: "member1", ip: "127.0.11.1", podCIDR: "10.10.0.0/16", serviceCIDR: "10.11.0.0/16", member: true},
	{name: "member2", ip: "127.0.12.1", podCIDR: "10.12.0.0/16", serviceCIDR: "10.13.0.0/16", member: true},
	{name: "member3", ip: "127.0.13.1", podCIDR: "10.14.0.0/16", serviceCIDR: "10.15.0.0/16", member: true},
}

const (
	etcdClientPort = 2379
	etcdPeerPort   = 2380
	apiserverPort  = 6443
	kcmPort        = 10257
	schedulerPort  = 10259

	// nodeName is the fake node kwok manages in every cluster.
	nodeName = "kwok-node-0"
	// mcsNamespace holds the Leases the mcs plugin watches.
	mcsNamespace = "mcs-system"
)

func (c cluster) addr(port int) string {
	return fmt.Sprintf("%s:%d", c.ip, port)
}

// kubernetesServiceIP is the ClusterIP the apiserver gives the kubernetes
// Service: the first address of the service CIDR.
func (c cluster) kubernetesServiceIP() (netip.Addr, error) {
	p, err := netip.ParsePrefix(c.serviceCIDR)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("cluster %s: service CIDR: %w", c.name, err)
	}
	return p.Addr().Next(), nil
}

// dnsServiceIP is the cluster DNS Service's ClusterIP, which kubeadm
// makes the tenth address of the service CIDR, and which the lab's kubelet
// writes into its pods' resolv.conf.
func (c cluster) dnsServiceIP() netip.Addr {
	a := netip.MustParsePrefix(c.serviceCIDR).Addr()
	for range 10 {
		a = a.Next()
	}
	return a
}

// lab holds the paths of a lab: binaries in binDir, state in dir.
type lab struct {
	binDir string
	dir    string
}

// newLab locates the lab from labctl's own executable, which is built into
// _output/bin beside the binaries it starts.
func newLab() (*lab, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("locating labctl's executable: %w", err)
	}
	exe, err = filepath.EvalSymlinks(exe)
	if err != nil {
		return nil, fmt.Errorf("locating labctl's executable: %w", err)
	}
	binDir := filepath.Dir(exe)
	return &lab{binDir: binDir, dir: filepath.Join(filepath.Dir(binDir), "lab")}, nil
}

func (l *lab) kubeconfigPath() string      { return filepath.Join(l.dir, "kubeconfig") }
func (l *lab) pkiDir() string              { return filepath.Join(l.dir, "pki") }
func (l *lab) clusterDir(c cluster) string { return filepath.Join(l.dir, c.name) }
func (l *lab) componentKubeconfig(c cluster) string {
	return filepath.Join(l.clusterDir(c), "kubeconfig")
}

func (l *lab) logPath(c cluster, comp *component) string {
	return filepath.Join(l.dir, "logs", c.name+"-"+comp.name+".log")
}

func (l *lab) pidPath(c cluster, comp *component) string {
	return filepath.Join(l.dir, "run", c.name+"-"+comp.name+".pid")
}

// stoppedPath marks a component that labctl stop stopped on purpose.
func (l *lab) stoppedPath(c cluster, comp *component) string {
	return filepath.Join(l.dir, "run", c.name+"-"+comp.name+".stopped")
}

// The locks are outside dir because a fresh start wipes dir.
func (l *lab) lockPath() string      { return filepath.Join(filepath.Dir(l.dir), ".lab.lock") }
func (l *lab) watchLockPath() string { return filepath.Join(filepath.Dir(l.dir), ".lab-watch.lock") }
