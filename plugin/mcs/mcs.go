// Package mcs is a CoreDNS plugin that answers multi-cluster service names:
// clusterset.local per the MCS API DNS specification (KEP-1645), and the
// native cluster.local names of services that a MultiClusterService enables,
// following a per-service strategy (RemoteAndLocal or LocalFirst).
package mcs

import (
	"net"

	"github.com/coredns/coredns/plugin"
	clog "github.com/coredns/coredns/plugin/pkg/log"
)

const pluginName = "mcs"

var log = clog.NewWithPlugin(pluginName)

// clustersetZone is the zone answered per the MCS DNS specification. The
// labels, annotation and Lease names the plugin reads come from
// sigs.k8s.io/mcs-api, k8s.io/api and this project's api package.
const clustersetZone = "clusterset.local."

// MCS is the plugin: the handler reads the in-memory index that the
// watcher's informers keep current.
type MCS struct {
	Next plugin.Handler

	cfg     *config
	watcher *watcher
	idx     *index
	nsAddrs []net.IP // addresses the server listens on, for the glue of ns.dns.<clusterset zone>
	kube    kubePeer // the server's kubernetes plugin, whose derived names mcs answers (derived.go)
}

// setNSAddrs sets the addresses the server listens on, known at start-up,
// and what ns.dns answers follows them.
func (m *MCS) setNSAddrs(addrs []net.IP) {
	m.nsAddrs = addrs
	m.idx.setGlueAddrs(addrs)
}

// Name implements plugin.Handler.
func (m *MCS) Name() string { return pluginName }
