package mcs

import (
	"net"
	"slices"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/miekg/dns"
)

// serveReverse answers a PTR query for the address of a ready endpoint
// imported from another cluster with that endpoint's clusterset name, as the
// kubernetes plugin answers one for a local endpoint with its cluster.local
// name. Every other name of a reverse zone goes to the next plugin
// untouched, before sync too: addresses that are not imported endpoints
// (this cluster's pods and Services, the VIPs of derived Services, anything
// outside the cluster) are the kubernetes plugin's, or its fallthrough's.
func (m *MCS) serveReverse(q *query) (dns.ResponseWriter, int, error) {
	w := q.state.W
	if q.state.QType() != dns.TypePTR || !m.watcher.ready.Load() {
		return w, 0, nil
	}
	ip := parseIP(dnsutil.ExtractAddressFromReverse(q.lower))
	if ip == nil {
		return w, 0, nil
	}
	names := m.idx.ptrNames(ip, clustersetZone)
	if len(names) == 0 {
		return w, 0, nil
	}
	rrs := make([]dns.RR, 0, len(names))
	for _, name := range names {
		rrs = append(rrs, &dns.PTR{Hdr: dns.RR_Header{Name: q.owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: m.cfg.ttl}, Ptr: name})
	}
	count(q.ctx, q.zone, "", outcomeRemote)
	return m.write(q, response{answer: rrs})
}

// ptrNames are the clusterset names of the endpoints with address ip in
// other clusters' imported slices of imported services, sorted, each once.
// A headless import's endpoint is <hostname>.<clusterid>.<svc>.<ns>.svc.<zone>
// (KEP-1645 DNS specification §2.4.3), the name that answers its address.
// A ClusterSetIP import has no names per endpoint or cluster (§2.3.4): its
// endpoints are reached through <svc>.<ns>.svc.<zone>, which is their name.
func (x *index) ptrNames(ip net.IP, zone string) []string {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var names []string
	for _, s := range x.addrs.slices(ip) {
		v := x.views[svcKey{s.namespace, s.service}]
		if v == nil { // not imported: no clusterset name
			continue
		}
		svcName := dnsutil.Join(s.service, s.namespace, "svc", zone)
		for e := range s.all() {
			if !e.ip.Equal(ip) {
				continue
			}
			name := svcName
			if v.headless() {
				name = e.hostname() + "." + s.cluster + "." + svcName
			}
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names
}
