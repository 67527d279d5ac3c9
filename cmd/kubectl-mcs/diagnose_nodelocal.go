package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/coredns/caddy/caddyfile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeLocal DNSCache (DaemonSet and ConfigMap kube-system/node-local-dns)
// answers the pods that use it: a zone it has no server block for goes to
// its "." block, which forwards to the node's resolvers, not to CoreDNS.
const nodeLocalName = "node-local-dns"

// clusterDNSPillar is what the node-local-dns ConfigMap of the Kubernetes
// addon says for the cluster DNS, which node-cache replaces at start.
const clusterDNSPillar = "__PILLAR__CLUSTER__DNS__"

// nodeLocalDNS is what a member's NodeLocal DNSCache is configured with.
type nodeLocalDNS struct {
	corefile   *string  // its ConfigMap's Corefile; nil: there is none
	clusterDNS []string // the ClusterIPs of kube-dns and of node-cache's kube-dns-upstream
}

// readNodeLocal reads NodeLocal DNSCache's ConfigMap, when its DaemonSet
// is there, and the ClusterIPs it should forward to.
func (m *memberState) readNodeLocal(ctx context.Context) {
	ds, err := optional(m.kube.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, nodeLocalName, metav1.GetOptions{}))
	if err != nil || ds == nil {
		if err != nil {
			m.unread["nodelocal"] = fmt.Errorf("DaemonSet kube-system/%s: %w", nodeLocalName, err)
		}
		return
	}
	n := &nodeLocalDNS{clusterDNS: []string{clusterDNSPillar}}
	cm, err := optional(m.kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, nodeLocalName, metav1.GetOptions{}))
	if err != nil {
		m.unread["nodelocal"] = fmt.Errorf("ConfigMap kube-system/%s: %w", nodeLocalName, err)
		return
	}
	if cm != nil {
		c := cm.Data["Corefile"]
		n.corefile = &c
	}
	for _, name := range []string{"kube-dns", "kube-dns-upstream"} {
		svc, err := optional(m.kube.CoreV1().Services(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{}))
		if err != nil {
			m.unread["nodelocal"] = fmt.Errorf("Service kube-system/%s: %w", name, err)
			return
		}
		if svc != nil {
			n.clusterDNS = append(n.clusterDNS, svc.Spec.ClusterIPs...)
		}
	}
	m.nodeLocal = n
}

// nodeLocalCheck: where NodeLocal DNSCache runs, its Corefile forwards
// clusterset.local to the cluster DNS, as it does cluster.local.
func nodeLocalCheck(m *memberState) []Check {
	name := "NodeLocal DNSCache forwards clusterset.local to the cluster DNS"
	fix := "add to ConfigMap kube-system/" + nodeLocalName + " a server block as its cluster.local one, for clusterset.local: `clusterset.local:53 { errors; cache 5; reload; loop; bind <its bind addresses>; forward . " + clusterDNSPillar + " { force_tcp }; prometheus :9253 }` (docs/troubleshooting.md, \"NodeLocal DNSCache\")"
	if err, ok := m.unread["nodelocal"]; ok {
		return []Check{unknown(linkCoreDNS, m.cluster, name, err.Error(), "")}
	}
	n := m.nodeLocal
	switch {
	case n == nil:
		return nil // not installed: pods ask CoreDNS
	case n.corefile == nil:
		return []Check{fail(linkCoreDNS, m.cluster, name, "DaemonSet kube-system/"+nodeLocalName+" runs, and there is no ConfigMap kube-system/"+nodeLocalName, fix)}
	}
	blocks, err := caddyfile.Parse(nodeLocalName, strings.NewReader(*n.corefile), nil)
	if err != nil {
		return []Check{fail(linkCoreDNS, m.cluster, name, "its Corefile does not parse: "+err.Error(), fix)}
	}
	for _, b := range blocks {
		if !slices.ContainsFunc(b.Keys, isClustersetZone) {
			continue
		}
		to := forwardsTo(b)
		if slices.ContainsFunc(to, func(addr string) bool { return slices.Contains(n.clusterDNS, addr) }) {
			return []Check{pass(linkCoreDNS, m.cluster, name)}
		}
		return []Check{fail(linkCoreDNS, m.cluster, name, fmt.Sprintf("its clusterset.local block forwards to %v, not to the cluster DNS (%s): pods using it get no clusterset.local answers", to, strings.Join(n.clusterDNS, ", ")), fix)}
	}
	return []Check{fail(linkCoreDNS, m.cluster, name, "its Corefile has no clusterset.local server block: pods using it (169.254.20.10, say) send clusterset.local names to the node's resolvers and get NXDOMAIN", fix)}
}

// isClustersetZone: a server block key for clusterset.local, with or
// without scheme, trailing dot and port.
func isClustersetZone(key string) bool {
	key = strings.TrimPrefix(key, "dns://")
	if host, _, err := net.SplitHostPort(key); err == nil {
		key = host
	}
	return strings.TrimSuffix(key, ".") == "clusterset.local"
}

// forwardsTo are the addresses of a block's forward plugins, without
// scheme and port.
func forwardsTo(b caddyfile.ServerBlock) []string {
	var out []string
	tokens := b.Tokens["forward"]
	for i := 0; i < len(tokens); i++ {
		if tokens[i].Text != "forward" || i+1 >= len(tokens) {
			continue
		}
		// forward FROM TO... on one line, then its options' block.
		for j := i + 2; j < len(tokens) && tokens[j].Line == tokens[i].Line && tokens[j].Text != "{"; j++ {
			addr := strings.TrimPrefix(strings.TrimPrefix(tokens[j].Text, "dns://"), "tls://")
			if host, _, err := net.SplitHostPort(addr); err == nil {
				addr = host
			}
			out = append(out, addr)
		}
	}
	return out
}
