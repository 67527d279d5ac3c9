package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
)

// kube-proxy runs in its cluster's node network (network.go) as a real node
// runs it: nftables mode, as the node kwok plays, with the cluster's pod
// CIDR as what is local. Conntrack sysctls are left alone: they are the
// machine's, not the namespace's. Its health and metrics listen inside the
// node.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
clusterCIDR: %[3]s
nodePortAddresses: [%[4]s/32]
healthzBindAddress: %[5]s
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`

// kubeProxyHealthz is kube-proxy's /healthz inside its node.
const kubeProxyHealthz = "127.0.0.1:10256"

func (l *lab) kubeProxyConfigPath(c cluster) string {
	return filepath.Join(l.clusterDir(c), "kube-proxy.yaml")
}

func (l *lab) writeKubeProxyConfig(c cluster) error {
	_, nodeIP := link(c)
	text := fmt.Sprintf(kubeProxyConfig, l.componentKubeconfig(c), nodeName, c.podCIDR, nodeIP, kubeProxyHealthz)
	return os.WriteFile(l.kubeProxyConfigPath(c), []byte(text), 0o644)
}

// nodeProxy is labctl node-proxy CLUSTER, the kube-proxy component: it runs
// the cluster's kube-proxy inside the node, and forwards the apiserver's
// address there (the node has no route to the host's loopback, by design)
// to the apiserver. Both are one process group, which labctl stops as one.
func (l *lab) nodeProxy(ctx context.Context, name string) error {
	i := slices.IndexFunc(clusters, func(c cluster) bool { return c.name == name })
	if i < 0 {
		return fmt.Errorf("no cluster %s", name)
	}
	c := clusters[i]
	var ln net.Listener
	if err := inNetns(nodeNetns(c), func() (err error) {
		ln, err = net.Listen("tcp", c.addr(apiserverPort))
		return err
	}); err != nil {
		return err
	}
	defer ln.Close()
	go forward(ln, c.addr(apiserverPort))
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", nodeNetns(c), filepath.Join(l.binDir, "kube-proxy"), "--config="+l.kubeProxyConfigPath(c))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	return cmd.Run()
}

// forward copies each connection ln accepts to a new one to addr, dialled
// from the host's network, until ln is closed.
func forward(ln net.Listener, addr string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer out.Close()
			go func() {
				_, _ = io.Copy(out, in)
				_ = out.Close()
			}()
			_, _ = io.Copy(in, out)
		}()
	}
}

// kubeProxyHealthy probes kube-proxy's /healthz from inside c's node: it
// passes once kube-proxy has programmed the node's rules.
func kubeProxyHealthy(c cluster) func(context.Context) error {
	dial := dialIn(nodeNetns(c))
	client := &http.Client{Transport: &http.Transport{
		DialContext:       func(_ context.Context, network, addr string) (net.Conn, error) { return dial(network, addr) },
		DisableKeepAlives: true,
	}}
	return httpHealthy(client, "http://"+kubeProxyHealthz+"/healthz", "lastUpdated")
}
