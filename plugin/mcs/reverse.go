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
// kubernetes plugin's, whatever another cluster's slice claims. Every
// other name of a reverse zone goes to the next plugin untouched, before
// sync too: addresses that are not imported endpoints (this cluster's pods
// and Services, the VIPs of derived Services, anything outside the cluster)
// are the kubernetes plugin's, or its fallthrough's.
//
// The kubernetes plugin names an imported endpoint under its derived-<svc>
// Service too (derived.go); mcs adds those names to a local answer, and
// answers them alone for an address only this cluster's own imported
// slices hold, so that they are there whether or not the kubernetes plugin
// reads the imported slices.
func (m *MCS) serveReverse(q *query) (dns.ResponseWriter, int, error) {
	w := q.state.W
	if q.state.QType() != dns.TypePTR || !m.watcher.ready.Load() {
		return w, 0, nil
	}
	ip := parseIP(dnsutil.ExtractAddressFromReverse(q.lower))
	if ip == nil {
		return w, 0, nil
	}
	names := m.idx.ptrNames(ip, clustersetZone, m.kube.zone)
	if len(names.clusterset) == 0 && len(names.derived) == 0 {
		return w, 0, nil
	}
	next := m.nextPTR(q)
	switch {
	case namesLocal(next):
		q.out = withDerived(next, names.derived, m.kube)
		return answered(dns.RcodeSuccess, nil)
	case len(names.clusterset) > 0:
		count(q.ctx, q.zone, "", outcomeRemote)
		return m.write(q, response{answer: ptrRecords(q.owner, names.clusterset, m.cfg.ttl)})
	case hasPTR(next): // the kubernetes plugin names this cluster's own imported endpoints itself
		q.out = next
		return answered(dns.RcodeSuccess, nil)
	}
	count(q.ctx, q.zone, "", outcomeCombined)
	return m.writeTTL(q, response{answer: ptrRecords(q.owner, names.derived, m.kube.ttl)}, m.kube.ttl)
}

func ptrRecords(owner string, names []string, ttl uint32) []dns.RR {
	rrs := make([]dns.RR, 0, len(names))
	for _, name := range names {
		rrs = append(rrs, &dns.PTR{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: ttl}, Ptr: name})
	}
	return rrs
}

// ptrSet is what the index names an address: the clusterset names of the
// endpoints at it imported from other clusters, and the names of every
// imported endpoint at it under its derived-<svc> Service.
type ptrSet struct {
	clusterset, derived []string
}

// ptrNames are the names of the endpoints with address ip in imported
// slices, sorted, each once. A headless import's endpoint is
// <hostname>.<clusterid>.<svc>.<ns>.svc.<zone> (KEP-1645 DNS specification
// §2.4.3), the name that answers its address. A ClusterSetIP import has
// no names per endpoint or cluster (§2.3.4): its endpoints are reached
// through <svc>.<ns>.svc.<zone>, which is their name. Only imported
// services have clusterset names; every imported slice has derived names,
// as the kubernetes plugin names them in its zone kubeZone ("": none).
func (x *index) ptrNames(ip net.IP, zone, kubeZone string) ptrSet {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var names ptrSet
	for s := range x.addrs.slices(ip) {
		v := x.importedView(svcKey{s.namespace(), s.service})
		svcName := dnsutil.Join(s.service, s.namespace(), "svc", zone)
		for e := range s.all() {
			if !e.ip.Equal(ip) {
				continue
			}
			if kubeZone != "" {
				names.derived = appendNew(names.derived, dnsutil.Join(e.hostname(), api.DerivedPrefix+s.service, s.namespace(), "svc", kubeZone))
			}
			if v == nil || s.cluster == x.self { // not imported, or this cluster's own: no clusterset name
				continue
			}
			name := svcName
			if v.headless() {
				name = e.hostname() + "." + s.cluster + "." + svcName
			}
			names.clusterset = appendNew(names.clusterset, name)
		}
	}
	slices.Sort(names.clusterset)
	slices.Sort(names.derived)
	return names
}

func appendNew(names []string, name string) []string {
	if slices.Contains(names, name) {
		return names
	}
	return append(names, name)
}

// nextPTR is the next plugin's answer to q, or nil.
func (m *MCS) nextPTR(q *query) *dns.Msg {
	if m.Next == nil {
		return nil
	}
	rec := &captured{ResponseWriter: q.state.W}
	if _, err := plugin.NextOrFailure(pluginName, m.Next, q.ctx, rec, q.state.Req); err != nil {
		return nil
	}
	return rec.msg
}

// namesLocal reports whether the next plugin's answer names a local object
// for the address. The kubernetes plugin names an imported endpoint too,
// under its derived-<svc> Service: that name is not a local object's, and
// mcs answers instead. A member's imported slice may claim any address;
// reverse lookups of this cluster's pods and Services keep their own names.
func namesLocal(m *dns.Msg) bool {
	return m != nil && slices.ContainsFunc(m.Answer, func(rr dns.RR) bool {
		ptr, ok := rr.(*dns.PTR)
		return ok && !derivedName(ptr.Ptr)
	})
}

func hasPTR(m *dns.Msg) bool {
	return m != nil && slices.ContainsFunc(m.Answer, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypePTR })
}

// withDerived adds to the kubernetes plugin's answer naming local endpoints
// the derived names of the address it has not: it names every endpoint at
// an address, in every slice it reads. An answer naming a Service (a
// ClusterIP) names nothing else, and is left as it is.
func withDerived(local *dns.Msg, derived []string, kube kubePeer) *dns.Msg {
	have := map[string]bool{}
	for _, rr := range local.Answer {
		ptr, ok := rr.(*dns.PTR)
		if !ok {
			continue
		}
		if !endpointName(ptr.Ptr, kube.zone) {
			return local
		}
		have[strings.ToLower(ptr.Ptr)] = true
	}
	missing := slices.DeleteFunc(slices.Clone(derived), func(name string) bool { return have[name] })
	local.Answer = append(local.Answer, ptrRecords(local.Question[0].Name, missing, kube.ttl)...)
	return local
}

// endpointName reports whether name is an endpoint's in zone,
// <host>.<svc>.<ns>.svc.<zone>, rather than a Service's.
func endpointName(name, zone string) bool {
	base, ok := strings.CutSuffix(strings.ToLower(name), "."+zone)
	return ok && dns.CountLabel(base) == 4
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
