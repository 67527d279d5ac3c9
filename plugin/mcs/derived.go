package mcs

import (
	"context"
	"math"
	"net"
	"reflect"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/etcd/msg"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/kubernetes/object"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The controller writes a derived-<svc> Service for every imported service,
// and the imported slices belong to it (kubernetes.io/service-name), so that
// kube-proxy programs the clusterset VIP. The kubernetes plugin answers the
// names of those Services from the same slices: their endpoints'
// names, and a headless one's own name and ports. Where it does not read
// them (its labels option leaving the imported slices, a fleet's bulk, out
// of its copy of the cluster), mcs answers those names instead, as the
// kubernetes plugin would, record for record, with its TTL; where it reads
// them, the names go to it untouched (README.md, "Derived names").

// kubePeer is what mcs answers derived names with of the kubernetes plugin
// of its server: its TTL, the zone it names PTR targets in (its first
// forward zone), what it reads, and its rules for what it shows. Without
// one, no derived names.
type kubePeer struct {
	ttl   uint32
	zone  string
	zones []string // its forward zones, where it names derived Services
	api   interface {
		SvcIndex(key string) []*object.Service
		EpIndex(key string) []*object.Endpoints
		HasSynced() bool
	}
	exposes   func(namespace string) bool                          // its rule for the names of a namespace
	ptrHides  bool                                                 // it applies exposes to PTR names too (its namespaces option)
	endpoints bool                                                 // it reads EndpointSlices (no noendpoints option)
	zonal     bool                                                 // it answers zonal names (its zonal option)
	reverse   func(context.Context, request.Request) []msg.Service // its PTR lookup alone; nil: none
}

// kubePeerOf finds the kubernetes plugin among handlers.
func kubePeerOf(handlers []plugin.Handler) kubePeer {
	for _, h := range handlers {
		k, ok := h.(*kubernetes.Kubernetes)
		if !ok {
			continue
		}
		var zones []string
		for _, z := range k.Zones {
			if dnsutil.IsReverse(z) == 0 {
				zones = append(zones, strings.ToLower(dns.Fqdn(z)))
			}
		}
		if len(zones) > 0 {
			return kubePeer{ttl: k.MinTTL(request.Request{}), zone: zones[0], zones: zones, api: k.APIConn,
				exposes: exposedBy(k, zones[0]), ptrHides: len(k.Namespaces) > 0, endpoints: option(k, "initEndpointsCache"), zonal: option(k, "zonal"),
				reverse: reverseOf(k)}
		}
	}
	return kubePeer{}
}

// exposedBy asks k whether it shows the names of a namespace: its answer
// for <ns>.svc.<zone>, which is a name error exactly when its rules (its
// namespaces and namespace_labels options, and the Namespace as its
// informer has it) hide the namespace, and then for every name in it.
func exposedBy(k *kubernetes.Kubernetes, zone string) func(string) bool {
	return func(namespace string) bool {
		r := new(dns.Msg)
		r.SetQuestion(dnsutil.Join(namespace, kubernetes.Svc, zone), dns.TypeA)
		_, err := k.Records(context.Background(), request.Request{Req: r, Zone: zone}, false)
		return !k.IsNameError(err)
	}
}

// option reads a boolean option of k: initEndpointsCache, whether it reads
// EndpointSlices at all, which its noendpoints option turns off (then it
// has no name of any endpoint, nor of a headless Service, and neither does
// mcs for it), and zonal, whether it answers zonal names. The plugin keeps
// its options unexported, so the field is read by name; should a CoreDNS
// release rename one, this says no, and mcs answers no derived name (no
// zonal name), which TestDerivedNamesAsKubernetes reports.
func option(k *kubernetes.Kubernetes, field string) bool {
	opts := reflect.ValueOf(k).Elem().FieldByName("opts")
	if opts.Kind() != reflect.Struct {
		return false
	}
	f := opts.FieldByName(field)
	return f.Kind() == reflect.Bool && f.Bool()
}

// reverseOf is k's PTR lookup of the names in its zones, without the
// fallthrough by which its handler passes the rest on.
func reverseOf(k *kubernetes.Kubernetes) func(context.Context, request.Request) []msg.Service {
	return func(ctx context.Context, state request.Request) []msg.Service {
		if k.APIConn == nil || plugin.Zones(k.Zones).Matches(state.Name()) == "" {
			return nil
		}
		svcs, _ := k.Reverse(ctx, state, false, plugin.Options{})
		return svcs
	}
}

// localPTR is the kubernetes plugin's name for a local object (a pod, a
// Service) at the address of the reverse name of state, the first in
// order when it names several, or "". Its names for imported endpoints,
// under their derived-<svc> Services, are no local object's.
func (k kubePeer) localPTR(ctx context.Context, state request.Request) string {
	if k.reverse == nil {
		return ""
	}
	local := ""
	for _, s := range k.reverse(ctx, state) {
		name := dns.Fqdn(strings.ToLower(s.Host))
		if !derivedName(name) && (local == "" || name < local) {
			local = name
		}
	}
	return local
}

// standsIn reports whether mcs answers for the kubernetes plugin the names
// of Service namespace/name, the controller's derived Service of an
// import: the plugin has synced (before, mcs cannot tell what it reads),
// reads EndpointSlices, shows the namespace, and holds the Service and
// none of its slices. headless is the Service's.
func (k kubePeer) standsIn(namespace, name string) (headless, ok bool) {
	if k.api == nil || !k.endpoints || !k.api.HasSynced() {
		return false, false
	}
	key := object.ServiceKey(name, namespace)
	svcs := k.api.SvcIndex(key)
	if len(svcs) == 0 || svcs[0].Type == corev1.ServiceTypeExternalName || len(k.api.EpIndex(key)) > 0 || !k.exposes(namespace) {
		return false, false
	}
	return svcs[0].Headless(), true
}

// showsPTR reports whether the kubernetes plugin, reading the imported
// slices, would answer the PTR name of an endpoint of namespace: it names
// no endpoint without reading slices, and applies its rules for a
// namespace to PTR names only with its namespaces option (not with
// namespace_labels), as its reverse lookup does. Before it has synced, its
// own answer stands.
func (k kubePeer) showsPTR(namespace string) bool {
	return k.api != nil && k.endpoints && k.api.HasSynced() && (!k.ptrHides || k.exposes(namespace))
}

// mayImport reports whether namespace/name may be an imported service, or
// its derived-<svc> Service, as far as the kubernetes plugin knows before
// mcs does: it holds the derived-<svc> Service the controller writes for
// every import (or, for a derived name, that Service), a headless one
// where headless is asked (an import's zonal names: the derived Service is
// headless exactly when the import is). Without a kubernetes plugin
// anything may be.
func (k kubePeer) mayImport(namespace, name string, headless bool) bool {
	if k.api == nil {
		return true
	}
	held := func(svc string) bool {
		svcs := k.api.SvcIndex(object.ServiceKey(svc, namespace))
		return len(svcs) > 0 && (!headless || svcs[0].Headless())
	}
	return held(api.DerivedPrefix+name) || strings.HasPrefix(name, api.DerivedPrefix) && held(name)
}

// derivedView is the imported service whose derived-<svc> Service q names,
// or nil.
func (m *MCS) derivedView(q *query) *view {
	svc, ok := strings.CutPrefix(q.name.service, api.DerivedPrefix)
	if !ok {
		return nil
	}
	return m.idx.view(q.name.namespace, svc)
}

// serveDerivedOnly answers a derived name in a forward zone of the
// kubernetes plugin that is not mcs's (its second zone, say): the
// kubernetes plugin names derived Services in each of its zones, and every
// other name there is its alone.
func (m *MCS) serveDerivedOnly(q *query) (dns.ResponseWriter, int, error) {
	w := q.state.W
	if !m.ofService(q) || !m.watcher.ready.Load() {
		return w, 0, nil
	}
	if d := m.derivedView(q); d != nil {
		return m.serveDerived(q, d)
	}
	return w, 0, nil
}

// serveDerived answers a name of v's derived Service from its imported
// slices (every cluster's, this one's included, stale or not: the
// kubernetes plugin knows nothing of either) when it stands in for the
// kubernetes plugin. A ClusterIP Service's name and ports are its VIPs',
// which the kubernetes plugin answers; a name no endpoint has goes on too,
// for its NXDOMAIN.
func (m *MCS) serveDerived(q *query, v *view) (dns.ResponseWriter, int, error) {
	w := q.state.W
	if m.idx.hasService(q.name.namespace, q.name.service) { // a user's, not the controller's
		return w, 0, nil
	}
	headless, ok := m.kube.standsIn(q.name.namespace, q.name.service)
	if !ok || q.name.shape == shapeProto || q.name.shape != shapeEndpoint && !headless { // the kubernetes plugin denies _<proto> names
		return w, 0, nil
	}
	svcName := dnsutil.Join(q.name.service, q.name.namespace, "svc", q.zone)
	qtype := q.state.QType()
	set := derivedSet{owner: q.owner, svcName: svcName, host: q.name.host, port: q.name.port, proto: q.name.proto,
		ttl: m.kube.ttl, budget: budget{state: q.state}, seen: map[[16]byte]struct{}{}, lastN: -1}
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		set.family = qtype
	case dns.TypeSRV:
		set.srv = newSRVSet(q, m.kube.ttl)
	}
	ss := v.imported()
	if q.name.shape == shapeZonal {
		ss = zonal(ss, &q.name)
	}
	set.collect(ss)
	if set.matched == 0 {
		return w, 0, nil
	}
	var resp response
	switch qtype {
	case dns.TypeA, dns.TypeAAAA:
		resp.answer = set.addrs()
	case dns.TypeSRV:
		resp.answer, resp.extra = set.records()
	}
	count(q.ctx, q.zone, "", outcomeCombined)
	return m.writeTTL(q, resp, m.kube.ttl)
}

// derivedSet is the endpoints and ports a derived name matches, as the
// kubernetes plugin lists them: one entry per endpoint and port of its slice
// (a slice without ports counting as one port that no SRV record is made
// of), by whose number it weighs SRV records.
type derivedSet struct {
	owner, svcName    string
	host, port, proto string
	ttl               uint32
	budget            budget
	srv               *srvSet // an SRV query's records; nil for other types, whose matches are only counted
	family            uint16  // an A or AAAA query's: the addresses collected; 0 for other types

	matched int
	ips     []net.IP // matching endpoints' addresses of family, each once, as many as budget allows
	seen    map[[16]byte]struct{}

	// The last port list counted and its count: an import's slices share
	// one interned list, whose ports are then read once a query.
	lastPorts portList
	lastN     int
}

// collect counts every match, as the kubernetes plugin weighs SRV records
// by them, but builds records only until the message is full: a name of
// every endpoint counts each slice's at once, from how many of its ports
// match, and reads its endpoints only while there is room for them; a
// per-endpoint name reads each endpoint's hostname.
func (d *derivedSet) collect(ss []*endpointSlice) {
	for _, s := range ss {
		if d.srv == nil && d.matched > 0 && d.full() {
			return // the name exists, and no SRV weight needs the count
		}
		ports := d.matchingPorts(s)
		if ports == 0 {
			continue
		}
		if d.host == "" {
			d.matched += ports * s.count()
		}
		for e := range s.all() {
			if d.host == "" && d.full() {
				break
			}
			if d.host != "" {
				if !e.named(d.host) {
					continue
				}
				d.matched += ports
			}
			d.add(s, e)
		}
	}
}

// matchingPorts is how many of s's ports match the name's port and
// protocol; a slice without ports counts as one port (the kubernetes
// plugin's port -1: an address, and no SRV record) where none is asked.
func (d *derivedSet) matchingPorts(s *endpointSlice) int {
	if s.ports == d.lastPorts && d.lastN >= 0 {
		return d.lastN
	}
	n, ported := 0, false
	for p := range s.ports.all() {
		ported = true
		if p.matches(d.port, d.proto) {
			n++
		}
	}
	if !ported && d.port == "" && d.proto == "" {
		n++
	}
	d.lastPorts, d.lastN = s.ports, n
	return n
}

// full reports whether the message has no room for another record.
func (d *derivedSet) full() bool {
	return (d.family == 0 || !d.budget.allows(len(d.ips))) && (d.srv == nil || d.srv.full())
}

// add builds the records of e, an endpoint of s that matches.
func (d *derivedSet) add(s *endpointSlice, e endpoint) {
	if family(e.ip) == d.family { // the other family takes none of the answer's room
		d.addAddr(e.ip)
	}
	if d.srv == nil {
		return
	}
	for p := range s.ports.all() {
		if p.port > 0 && p.matches(d.port, d.proto) && !d.srv.full() {
			d.srv.add(d.owner, e.hostname()+"."+d.svcName, p, e.ip)
		}
	}
}

func (d *derivedSet) addAddr(ip net.IP) {
	if _, dup := d.seen[addrKey(ip)]; !dup && d.budget.allows(len(d.ips)) {
		d.seen[addrKey(ip)] = struct{}{}
		d.ips = append(d.ips, ip)
	}
}

// addrs are the A or AAAA records of the matching endpoints.
func (d *derivedSet) addrs() []dns.RR {
	var rrs []dns.RR
	for _, ip := range d.ips {
		rrs = append(rrs, addrRR(d.owner, ip, d.ttl))
	}
	return rrs
}

// records is the SRV answer, weighed as the kubernetes plugin weighs it:
// 100 over every entry matched, duplicates and portless ones included,
// rounded down in floating point, at least 1.
func (d *derivedSet) records() (answer, extra []dns.RR) {
	w := uint16(max(1, math.Floor(100.0/float64(100*d.matched)*100)))
	for _, rr := range d.srv.answer {
		rr.(*dns.SRV).Weight = w
	}
	return d.srv.answer, d.srv.extra
}
