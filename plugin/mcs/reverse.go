package mcs

import (
	"net"
	"slices"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// serveReverse answers a PTR query for the address of a ready endpoint
// imported from another cluster with that endpoint's clusterset name, as the
// kubernetes plugin answers one for a local endpoint with its cluster.local
// name; but an address a local object holds (a pod, a Service) is the
// kubernetes plugin's, whatever another cluster's slice claims. Every other name of a reverse zone goes to the next plugin
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
	if local := m.localPTR(q); local != nil {
		q.out = local
		return answered(dns.RcodeSuccess, nil)
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
	for s := range x.addrs.slices(ip) {
		v := x.importedView(svcKey{s.namespace(), s.service})
		if v == nil { // not imported: no clusterset name
			continue
		}
		svcName := dnsutil.Join(s.service, s.namespace(), "svc", zone)
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

// localPTR is the next plugin's answer to q when it names a local object
// for the address, or nil. The kubernetes plugin names an imported
// endpoint too, under its derived-<svc> Service: that name is not a local
// object's, and mcs answers instead. A member's imported slice may claim
// any address; reverse lookups of this cluster's pods and Services keep
// their own names.
func (m *MCS) localPTR(q *query) *dns.Msg {
	if m.Next == nil {
		return nil
	}
	rec := &captured{ResponseWriter: q.state.W}
	if _, err := plugin.NextOrFailure(pluginName, m.Next, q.ctx, rec, q.state.Req); err != nil || rec.msg == nil {
		return nil
	}
	for _, rr := range rec.msg.Answer {
		if ptr, ok := rr.(*dns.PTR); ok && !derivedName(ptr.Ptr) {
			return rec.msg
		}
	}
	return nil
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

// captured holds the message a plugin writes instead of sending it.
type captured struct {
	dns.ResponseWriter
	msg *dns.Msg
}

// WriteMsg implements dns.ResponseWriter.
func (c *captured) WriteMsg(m *dns.Msg) error {
	c.msg = m
	return nil
}
