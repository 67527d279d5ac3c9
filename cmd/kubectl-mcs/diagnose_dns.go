package main

import (
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/plugin/mcs/decide"
)

func isForbidden(err error) bool { return apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) }

// expectation is the A answer a name should get, and why; skip says the
// answer is not mcs's to give, or not one diagnose can predict.
type expectation struct {
	addrs []string
	why   string
	skip  bool
}

// Corefile options of the mcs stanza that change the answer.
var (
	answerRE   = regexp.MustCompile(`(?m)^\s*answer\s+(vip|endpoints)\s*$`)
	strategyRE = regexp.MustCompile(`(?m)^\s*strategy\s+(RemoteAndLocal|LocalFirst)\s*$`)
)

// staleLease is the plugin's rule: a Lease past renewTime + duration; none,
// or one without either, is never stale.
func staleLease(l *coordinationv1.Lease, now time.Time) bool {
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// expectNative is what <svc>.<ns>.svc.cluster.local should answer in m:
// the set the plugin's decision table (package plugin/mcs/decide) picks
// from what m holds.
func expectNative(m *memberState, now time.Time) expectation {
	corefile := ""
	if m.corefile != nil {
		corefile = *m.corefile
	}
	strategy := m.imp.Annotations[api.AnnotationStrategy]
	if o := strategyRE.FindStringSubmatch(corefile); strategy == "" && o != nil {
		strategy = o[1]
	}
	if strategy == "" {
		return expectation{skip: true, why: "no strategy: the kubernetes plugin answers it"}
	}
	var localVIPs []string
	if m.service != nil {
		localVIPs = m.service.Spec.ClusterIPs
	}
	o := answerRE.FindStringSubmatch(corefile)
	policy := decide.PolicyOf(m.imp.Annotations)
	r := decide.Rules{
		LocalFirst: strategy == string(api.LocalFirst), AnswerVIP: o == nil || o[1] == "vip", Headless: m.imp.Spec.Type == mcsv1b1.Headless,
		LocalVIP: anyIP(localVIPs), SetVIP: anyIP(m.imp.Spec.IPs), MinReady: policy.MinReady, Remapped: remapped(m),
	}
	local, fresh, stale := endpointSets(m, now)
	e := decide.Endpoints{Local: len(local), Fresh: len(fresh) > 0, Stale: len(stale) > 0}
	a := decide.Service(&r, e)
	why := fmt.Sprintf("%s answers %s: %d ready endpoints here, %d in fresh providers, %d in stale ones", strategy, setNames[a.Set], len(local), len(fresh), len(stale))
	if r.LocalFirst {
		why += fmt.Sprintf(", LocalFirst's minimum %d", max(r.MinReady, 1))
	}
	var chosen []endpointAt
	switch a.Set {
	case decide.None:
		return expectation{skip: true, why: why + ": answered as the kubernetes plugin answers an endpoint-less service"}
	case decide.LocalVIP:
		return expectation{addrs: ipv4(localVIPs), why: why}
	case decide.SetVIP:
		if a.FellBack {
			// The provider Service of the first listed provider, once the
			// controller gave it a VIP (plugin/mcs/README.md, failover order).
			c := decide.FirstListed(fresh, stale, policy.Order, endpointCluster)
			if vips := api.ParseProviderVIPs(m.imp.Annotations[api.AnnotationProviderVIPs])[c]; len(vips) > 0 {
				return expectation{addrs: ipv4(vips), why: why + ", through " + c + "'s provider Service"}
			}
		}
		return expectation{addrs: ipv4(m.imp.Spec.IPs), why: why}
	case decide.Local:
		chosen = local
	case decide.LocalAndFresh:
		chosen = slices.Concat(local, fresh)
	case decide.Fresh:
		chosen = fresh
	case decide.Stale:
		chosen = stale
	}
	if a.Failover {
		chosen = decide.Preferred(chosen, policy.Order, endpointCluster)
	}
	return expectation{addrs: addresses(chosen), why: why}
}

// remapped is the plugin's decide.Rules.Remapped for m: a slice with a
// ready endpoint maps a port of the service to another number, its own
// slices against its Service's ports (the import's without one), the
// imported ones against the import's.
func remapped(m *memberState) bool {
	if m.imp.Spec.Type == mcsv1b1.Headless {
		return false
	}
	var imported []decide.Port
	for _, p := range m.imp.Spec.Ports {
		imported = append(imported, decide.Port{Name: p.Name, Protocol: string(p.Protocol), Number: p.Port})
	}
	local := imported
	if m.service != nil {
		local = nil
		for _, p := range m.service.Spec.Ports {
			local = append(local, decide.Port{Name: p.Name, Protocol: string(p.Protocol), Number: p.Port})
		}
	}
	return slicesRemapped(m.own, local) || slicesRemapped(m.imported, imported)
}

// slicesRemapped reports whether one of ss with a ready endpoint has a
// port that service has under another number.
func slicesRemapped(ss []discoveryv1.EndpointSlice, service []decide.Port) bool {
	for _, s := range ss {
		if len(readyEndpoints([]discoveryv1.EndpointSlice{s})) == 0 {
			continue
		}
		for _, p := range s.Ports {
			if p.Port == nil {
				continue
			}
			e := decide.Port{Name: ptr.Deref(p.Name, ""), Number: *p.Port}
			if p.Protocol != nil {
				e.Protocol = string(*p.Protocol)
			}
			if decide.Remapped(service, e) {
				return true
			}
		}
	}
	return false
}

// setNames say what each set of the table is.
var setNames = map[decide.Set]string{
	decide.None:          "nothing",
	decide.LocalVIP:      "the local Service's VIP",
	decide.SetVIP:        "the ServiceImport's VIP",
	decide.Local:         "this cluster's ready endpoints",
	decide.LocalAndFresh: "every cluster's ready endpoints, stale providers' left out",
	decide.Fresh:         "the fresh providers' ready endpoints, by the failover order",
	decide.Stale:         "the stale providers' endpoints, as nothing else is left",
}

// endpointAt is a ready endpoint: its first address, and the cluster it is
// imported from ("" for the member's own).
type endpointAt struct{ cluster, addr string }

// endpointSets are consumer m's ready endpoints of either family, as the
// plugin counts them: its own (L), and the other providers' imported ones
// (R) from fresh and from stale providers, each sorted by cluster.
func endpointSets(m *memberState, now time.Time) (local, fresh, stale []endpointAt) {
	local = readyEndpoints(m.own)
	for _, e := range readyEndpoints(m.imported) {
		switch {
		case e.cluster == m.cluster:
			// the copies of its own slices: L holds them
		case staleLease(m.leases[e.cluster], now):
			stale = append(stale, e)
		default:
			fresh = append(fresh, e)
		}
	}
	byCluster := func(a, b endpointAt) int { return strings.Compare(a.cluster, b.cluster) }
	slices.SortStableFunc(fresh, byCluster)
	slices.SortStableFunc(stale, byCluster)
	return local, fresh, stale
}

// readyEndpoints are the ready endpoints of ss that the plugin reads: of
// an IP family, with an address.
func readyEndpoints(ss []discoveryv1.EndpointSlice) []endpointAt {
	var out []endpointAt
	for _, s := range ss {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue
		}
		for _, e := range s.Endpoints {
			if a, ok := firstAddress(e); ok && net.ParseIP(a) != nil && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				out = append(out, endpointAt{cluster: s.Labels[mcsv1b1.LabelSourceCluster], addr: a})
			}
		}
	}
	return out
}

// addresses are the IPv4 addresses of es, as an A answer holds them.
func addresses(es []endpointAt) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.addr)
	}
	return slices.Compact(ipv4(out))
}

func anyIP(ips []string) bool {
	return slices.ContainsFunc(ips, func(ip string) bool { return net.ParseIP(ip) != nil })
}

// expectClusterset is what <svc>.<ns>.svc.clusterset.local should answer
// in m: the import's IPs, or for a headless import every cluster's ready
// endpoints (its own cluster's imported copies among them), the stale
// clusters' left out while a fresh one is left.
func expectClusterset(m *memberState, now time.Time) expectation {
	if m.imp.Spec.Type != mcsv1b1.Headless {
		return expectation{addrs: ipv4(m.imp.Spec.IPs), why: "the ServiceImport's spec.ips"}
	}
	all, fresh := readyEndpoints(m.imported), []endpointAt(nil)
	for _, e := range all {
		if !staleLease(m.leases[e.cluster], now) {
			fresh = append(fresh, e)
		}
	}
	if len(fresh) > 0 {
		all = fresh
	}
	return expectation{addrs: addresses(all), why: "a headless import: every cluster's ready endpoints"}
}

func ipv4(ips []string) []string {
	var out []string
	for _, ip := range ips {
		if p := net.ParseIP(ip); p != nil && p.To4() != nil {
			out = append(out, ip)
		}
	}
	slices.Sort(out)
	return out
}

// dnsChecks ask m's coredns-mcs, at server, for the service's two names
// and compare each answer with what it should be.
func dnsChecks(ctx context.Context, w *world, m *memberState, server string, now time.Time) []Check {
	if m.imp == nil {
		return nil // importCheck says so: there is nothing mcs should answer
	}
	var out []Check
	for _, q := range []struct {
		zone   string
		expect expectation
	}{{"cluster.local.", expectNative(m, now)}, {"clusterset.local.", expectClusterset(m, now)}} {
		name := fmt.Sprintf("%s.%s.svc.%s", w.service, w.namespace, q.zone)
		out = append(out, answerCheck(ctx, m.cluster, server, name, q.expect))
	}
	return out
}

// answerCheck asks server for name and compares the answer with e.
func answerCheck(ctx context.Context, cluster, server, name string, e expectation) Check {
	check := "coredns-mcs at " + server + " answers " + name
	fix := "coredns-mcs answers from what it has synced: see its readiness and metrics (the coredns checks) and its log, grep plugin/mcs (docs/troubleshooting.md)"
	if e.skip {
		return pass(linkDNS, cluster, check+": not compared, "+e.why)
	}
	got, err := ask(ctx, server, name)
	if err != nil {
		return fail(linkDNS, cluster, check, "no answer: "+err.Error()+"; it should be "+strings.Join(e.addrs, ", ")+" ("+e.why+")", fix)
	}
	slices.Sort(got)
	if !slices.Equal(got, e.addrs) {
		return fail(linkDNS, cluster, check, fmt.Sprintf("it answers %s; it should be %s (%s)", strings.Join(got, ", "), orNone(strings.Join(e.addrs, ", ")), e.why), fix)
	}
	return pass(linkDNS, cluster, check+": "+strings.Join(got, ", "))
}

// ask is the A records server answers for name.
func ask(ctx context.Context, server, name string) ([]string, error) {
	if _, _, err := net.SplitHostPort(server); err != nil {
		return nil, err
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	resp, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA), server)
	if err != nil {
		return nil, err
	}
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
		return nil, fmt.Errorf("%s, %d answers", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	var out []string
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out, nil
}

// firstAddress is an endpoint's address as the plugin and kube-proxy take
// it: its first.
func firstAddress(e discoveryv1.Endpoint) (string, bool) {
	if len(e.Addresses) == 0 {
		return "", false
	}
	return e.Addresses[0], true
}

func endpointCluster(e endpointAt) string { return e.cluster }
