package mcs

import (
	"net"
	"strings"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// serveReverse answers a PTR query for the address of an endpoint in an
// imported slice with one name, as the MCS DNS specification has it ("only
// one PTR record may exist per IP address"):
//
//   - the kubernetes plugin's name for a local object at the address (a pod,
//     a Service): a member's slice may claim any address, and the
//     specification requires no further record for an address the
//     cluster-local schema names;
//   - else the clusterset name of an endpoint imported from another cluster;
//   - else the name the kubernetes plugin gives an imported endpoint under its
//     derived-<svc> Service (derived.go), which mcs answers whether or not it
//     reads the imported slices.
//
// Only the kubernetes plugin is asked, never the plugins after it: through
// its fallthrough the question would reach forward, whose upstream's names
// (a cloud's ip-10-2-0-5.ec2.internal) are no local object's, and every
// such query would wait for it. Every other name of a reverse zone goes to
// the next plugin untouched, before sync too: addresses that are not
// imported endpoints (this cluster's pods and Services, the VIPs of derived
// Services, anything outside the cluster) are the kubernetes plugin's, or
// its fallthrough's.
func (m *MCS) serveReverse(q *query) (dns.ResponseWriter, int, error) {
	w := q.state.W
	if q.state.QType() != dns.TypePTR || !m.watcher.ready.Load() {
		return w, 0, nil
	}
	ip := parseIP(dnsutil.ExtractAddressFromReverse(q.lower))
	if ip == nil {
		return w, 0, nil
	}
	names := m.idx.ptrNames(ip, clustersetZone, m.kube.zone, m.kube.showsPTR)
	if names.clusterset == "" && names.derived == "" {
		return w, 0, nil
	}
	if local := m.kube.localPTR(q.ctx, q.state); local != "" {
		count(q.ctx, q.zone, "", outcomeLocal)
		return m.writeTTL(q, response{answer: ptrRecords(q.owner, local, m.kube.ttl)}, m.kube.ttl)
	}
	if names.clusterset != "" {
		count(q.ctx, q.zone, "", outcomeRemote)
		return m.write(q, response{answer: ptrRecords(q.owner, names.clusterset, m.cfg.ttl)})
	}
	count(q.ctx, q.zone, "", outcomeCombined)
	return m.writeTTL(q, response{answer: ptrRecords(q.owner, names.derived, m.kube.ttl)}, m.kube.ttl)
}

func ptrRecords(owner, name string, ttl uint32) []dns.RR {
	return []dns.RR{&dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: name}}
}

// ptrSet is the name an address gets of each kind, "" for none: the
// clusterset name of an endpoint at it imported from another cluster, and
// the name of an imported endpoint at it under its derived-<svc> Service.
type ptrSet struct {
	clusterset, derived string
}

// ptrNames are the names of the endpoints with address ip in imported
// slices, the preferred one of each kind (see preferPTR). A headless
// import's endpoint is <hostname>.<clusterid>.<svc>.<ns>.svc.<zone>
// (KEP-1645 DNS specification §2.4.3), the name that answers its address.
// A ClusterSetIP import has no names per endpoint or cluster (§2.3.4): its
// endpoints are reached through <svc>.<ns>.svc.<zone>, which is their name.
// Only imported services have clusterset names; every imported slice has
// derived names, as the kubernetes plugin names them in its zone kubeZone
// ("": none), in the namespaces whose PTR names it shows.
func (x *index) ptrNames(ip net.IP, zone, kubeZone string, shows func(namespace string) bool) ptrSet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var names ptrSet
	for s := range x.addrs.slices(ip) {
		v := x.importedView(svcKey{s.namespace(), s.service})
		svcName := dnsutil.Join(s.service, s.namespace(), "svc", zone)
		derived := kubeZone != "" && shows(s.namespace())
		for e := range s.all() {
			if !e.ip.Equal(ip) {
				continue
			}
			if derived {
				names.derived = preferPTR(names.derived, dnsutil.Join(e.hostname(), api.DerivedPrefix+s.service, s.namespace(), "svc", kubeZone))
			}
			if v == nil || s.cluster == x.self { // not imported, or this cluster's own: no clusterset name
				continue
			}
			name := svcName
			if v.headless() {
				name = e.hostname() + "." + s.cluster + "." + svcName
			}
			names.clusterset = preferPTR(names.clusterset, name)
		}
	}
	return names
}

// preferPTR is the PTR target of an address that has both names, have
// ("": none) and name: an endpoint's name, which the specification defines
// for a headless import, over a service's, which it does not define for
// endpoints; then the first in order, so that the answer is stable.
func preferPTR(have, name string) string {
	if have == "" {
		return name
	}
	if n, h := dns.CountLabel(name), dns.CountLabel(have); n > h {
		return name
	} else if n < h {
		return have
	}
	return min(have, name)
}

// derivedName reports whether name is a derived-<svc> Service's, or one of
// its endpoints': <svc>.<ns>.svc… or <host>.<svc>.<ns>.svc….
func derivedName(name string) bool {
	labels := dns.SplitDomainName(strings.ToLower(name))
	for i := range min(2, len(labels)) {
		if strings.HasPrefix(labels[i], api.DerivedPrefix) && len(labels) > i+2 && labels[i+2] == "svc" {
			return true
		}
	}
	return false
}
