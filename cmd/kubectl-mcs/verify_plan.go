package main

import (
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// The plan of kubectl mcs verify: which names each consumer's client asks
// its cluster DNS, which answer the strategy calls for, and which clusters
// a connection may reach. It is pure: what verify deployed and saw
// (observed) in, probes out.
//
// verify runs one server pod (StatefulSet mcs-verify, pod mcs-verify-0) in
// each provider behind three Services, each exported one way:
//
//	mcs-verify           ClusterIP  ServiceExport (the MCS API)         clusterset.local
//	mcs-verify-local     ClusterIP  MultiClusterService, LocalFirst     cluster.local and clusterset.local, failover
//	mcs-verify-headless  headless   MultiClusterService, RemoteAndLocal cluster.local and clusterset.local, per-pod names
const (
	verifyExported = "mcs-verify"
	verifyLocal    = "mcs-verify-local"
	verifyHeadless = "mcs-verify-headless"
	verifyServer   = "mcs-verify" // the StatefulSet; its pod is mcs-verify-0
	verifyClient   = "mcs-verify-client"
	verifyPort     = 8080
	verifyPortName = "echo"
)

// serverPod is the server's pod name, which is also its hostname in the
// headless Service's endpoints.
var serverPod = verifyServer + "-0"

// observed is what verify deployed and read back: the world the plan
// predicts answers from.
type observed struct {
	namespace  string
	providers  []string
	consumers  []string
	servers    map[string][]string            // provider: its ready server pod's addresses
	localVIPs  map[string][]string            // provider: mcs-verify-local's ClusterIPs there
	imports    map[string]map[string][]string // consumer: service: its ServiceImport's spec.ips (nil: none)
	answerVIPs map[string]bool                // consumer: its Corefile answers VIPs (the default)
}

// withoutServer is o with provider's server gone, as after it scaled to
// zero.
func (o *observed) withoutServer(provider string) *observed {
	c := *o
	c.servers = map[string][]string{}
	for p, ips := range o.servers {
		if p != provider {
			c.servers[p] = ips
		}
	}
	return &c
}

// probe is one question a consumer's client asks: a DNS query, whose sorted
// records must be want, or a connection, whose server must be one of the
// clusters want names.
type probe struct {
	cluster string // the consumer whose client asks
	qtype   uint16 // 0: a connection
	name    string
	want    []string
	about   string // why want is the answer
	problem string // set when the plan has no answer to expect: the probe fails as it stands
}

// check is the probe's name in the table: "dns A", "connect".
func (p *probe) check() string {
	if p.qtype == 0 {
		return "connect"
	}
	return "dns " + dns.TypeToString[p.qtype]
}

// plan is every probe of the steady fleet: each consumer's names.
func (o *observed) plan() []probe {
	var out []probe
	for _, c := range o.consumers {
		out = append(out, o.exportedProbes(c)...)
		out = append(out, o.localFirstProbes(c)...)
		out = append(out, o.headlessProbes(c)...)
	}
	return out
}

// failoverPlan is what consumer c's native LocalFirst name answers once its
// own server is gone (the other providers'), or, when it is back, its own:
// o says which.
func (o *observed) failoverPlan(c string) []probe {
	return o.localFirstNative(c)
}

// exportedProbes: mcs-verify, exported by ServiceExports, answers its
// clusterset name with the import's VIP, which kube-proxy sends to a
// provider.
func (o *observed) exportedProbes(c string) []probe {
	name := o.fqdn(verifyExported, "clusterset.local")
	ips, ok := o.imports[c][verifyExported]
	if !ok || len(ips) == 0 {
		missing := "no ServiceImport " + verifyExported + " with IPs in " + c + ": its ServiceExports were not imported (see the import rows, and kubectl mcs diagnose " + verifyExported + " -n " + o.namespace + ")"
		return []probe{{cluster: c, qtype: dns.TypeA, name: name, problem: missing}}
	}
	about := "ServiceExport: the ServiceImport's IPs"
	out := addressProbes(c, name, ips, about)
	out = append(out, probe{cluster: c, qtype: dns.TypeSRV, name: o.srvName(verifyExported, "clusterset.local"), want: []string{srvRecord(name)}, about: about})
	return append(out, probe{cluster: c, name: name, want: o.serving(), about: "through kube-proxy to a provider"})
}

// localFirstProbes: mcs-verify-local, LocalFirst, by both names.
func (o *observed) localFirstProbes(c string) []probe {
	out := o.localFirstNative(c)
	set := o.fqdn(verifyLocal, "clusterset.local")
	if ips := o.imports[c][verifyLocal]; len(ips) > 0 {
		return append(out, probe{cluster: c, qtype: dns.TypeA, name: set, want: family(ips, false), about: "the ServiceImport's IPs"})
	}
	return append(out, probe{cluster: c, qtype: dns.TypeA, name: set, problem: "no ServiceImport " + verifyLocal + " with IPs in " + c})
}

// localFirstNative: mcs-verify-local's native name answers c's own server
// while it has one ready, else the other providers'; A, AAAA, SRV and a
// connection.
func (o *observed) localFirstNative(c string) []probe {
	native := o.fqdn(verifyLocal, "cluster.local")
	local := len(o.servers[c]) > 0
	var others []string
	for _, p := range o.serving() {
		if p != c {
			others = append(others, p)
		}
	}
	var addrs, from []string
	var about string
	var srv []string
	switch {
	case local && o.answerVIPs[c]:
		addrs, from, about = o.localVIPs[c], []string{c}, "LocalFirst, its own server ready: the local Service's VIP"
		srv = []string{srvRecord(native)}
	case local:
		addrs, from, about = o.servers[c], []string{c}, "LocalFirst, its own server ready: its own endpoints"
		srv = endpointRecords(addrs, native)
	case o.answerVIPs[c]:
		addrs, from, about = o.imports[c][verifyLocal], others, "LocalFirst, no server of its own: the ServiceImport's IPs"
		srv = []string{srvRecord(native)}
	default:
		for _, p := range others {
			addrs = append(addrs, o.servers[p]...)
		}
		from, about = others, "LocalFirst, no server of its own: the other providers' endpoints"
		srv = endpointRecords(addrs, native)
	}
	if len(addrs) == 0 {
		return []probe{{cluster: c, qtype: dns.TypeA, name: native, problem: about + ": there is none (no ServiceImport with IPs, or no server ready)"}}
	}
	return append(addressProbes(c, native, addrs, about),
		probe{cluster: c, qtype: dns.TypeSRV, name: o.srvName(verifyLocal, "cluster.local"), want: srv, about: about},
		probe{cluster: c, name: native, want: from, about: about + ", connected through kube-proxy"})
}

// headlessProbes: mcs-verify-headless, RemoteAndLocal and headless,
// answers every provider's server by both names; each server's own
// clusterset name answers it alone and takes a connection straight to the
// pod, across the clusters' pod network.
func (o *observed) headlessProbes(c string) []probe {
	var all []string
	for _, p := range o.serving() {
		all = append(all, o.servers[p]...)
	}
	if len(all) == 0 {
		return []probe{{cluster: c, qtype: dns.TypeA, name: o.fqdn(verifyHeadless, "cluster.local"), problem: "no provider has its server ready"}}
	}
	about := "RemoteAndLocal, headless: every provider's endpoints"
	out := []probe{
		{cluster: c, qtype: dns.TypeA, name: o.fqdn(verifyHeadless, "cluster.local"), want: family(all, false), about: about},
		{cluster: c, qtype: dns.TypeA, name: o.fqdn(verifyHeadless, "clusterset.local"), want: family(all, false), about: "headless: every provider's endpoints"},
	}
	pod := serverPod + "." + o.fqdn(verifyHeadless, "cluster.local")
	if own := o.servers[c]; len(own) > 0 {
		out = append(out, probe{cluster: c, qtype: dns.TypeA, name: pod, want: family(own, false), about: "a per-pod name: its own pod of that name, alone"})
	} else {
		out = append(out, probe{cluster: c, qtype: dns.TypeA, name: pod, want: family(all, false), about: "a per-pod name: every provider's pod of that name"})
	}
	var srv []string
	for _, p := range o.serving() {
		name := serverPod + "." + p + "." + o.fqdn(verifyHeadless, "clusterset.local")
		srv = append(srv, srvRecord(name))
		out = append(out,
			probe{cluster: c, qtype: dns.TypeA, name: name, want: family(o.servers[p], false), about: "the per-pod clusterset name of " + p + "'s server"},
			probe{cluster: c, name: name, want: []string{p}, about: "straight to " + p + "'s pod, across the pod network"})
	}
	slices.Sort(srv)
	return append(out, probe{cluster: c, qtype: dns.TypeSRV, name: o.srvName(verifyHeadless, "clusterset.local"), want: srv, about: "headless: a record per endpoint"})
}

// serving are the providers whose server is ready, sorted.
func (o *observed) serving() []string {
	var out []string
	for _, p := range o.providers {
		if len(o.servers[p]) > 0 {
			out = append(out, p)
		}
	}
	return out
}

func (o *observed) fqdn(svc, zone string) string {
	return svc + "." + o.namespace + ".svc." + zone + "."
}

func (o *observed) srvName(svc, zone string) string {
	return "_" + verifyPortName + "._tcp." + o.fqdn(svc, zone)
}

// addressProbes are the A and AAAA questions of name, each answered by
// the addresses of its family among addrs.
func addressProbes(c, name string, addrs []string, about string) []probe {
	return []probe{
		{cluster: c, qtype: dns.TypeA, name: name, want: family(addrs, false), about: about},
		{cluster: c, qtype: dns.TypeAAAA, name: name, want: family(addrs, true), about: about},
	}
}

// family are the addresses of addrs of one family, sorted.
func family(addrs []string, v6 bool) []string {
	var out []string
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil && (ip.To4() == nil) == v6 {
			out = append(out, ip.String())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// srvRecord is an SRV answer's target and port, as the probe compares it.
func srvRecord(target string) string {
	return target + " " + strconv.Itoa(verifyPort)
}

// endpointRecords are the SRV targets of endpoints without a hostname:
// each address with its dots or colons as dashes, under the service's
// name (plugin/mcs/README.md).
func endpointRecords(addrs []string, service string) []string {
	var out []string
	for _, a := range addrs {
		out = append(out, srvRecord(strings.NewReplacer(".", "-", ":", "-").Replace(a)+"."+service))
	}
	slices.Sort(out)
	return out
}
