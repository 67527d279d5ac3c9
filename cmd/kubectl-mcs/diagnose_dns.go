package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
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

// endpointSets are, for consumer m, the ready IPv4 endpoints by cluster:
// L its own, R the other providers' imported ones, with the stale
// providers' left out while a fresh one is left (plugin/mcs/README.md,
// "Stale clusters").
func endpointSets(m *memberState, now time.Time) (local, remote map[string]string) {
	local = readyAddresses(m.own)
	all := readyAddresses(m.imported)
	remote, fresh := map[string]string{}, map[string]string{}
	for a, c := range all {
		if c == m.cluster {
			continue // the copies of its own slices: L holds them
		}
		remote[a] = c
		if !stale(m.leases[c], now) {
			fresh[a] = c
		}
	}
	if len(fresh) > 0 {
		remote = fresh
	}
	return local, remote
}

// stale is the plugin's rule: a Lease past renewTime + duration; none, or
// one without either, is never stale.
func stale(l *coordinationv1.Lease, now time.Time) bool {
	if l == nil || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// expectNative is what <svc>.<ns>.svc.cluster.local should answer in m,
// by the service's strategy (plugin/mcs/README.md, "Native names").
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
	endpoints := m.imp.Spec.Type == mcsv1b1.Headless
	if o := answerRE.FindStringSubmatch(corefile); o != nil && o[1] == "endpoints" {
		endpoints = true
	}
	local, remote := endpointSets(m, now)
	var vipLocal []string
	if m.service != nil {
		vipLocal = ipv4(m.service.Spec.ClusterIPs)
	}
	vipSet := ipv4(m.imp.Spec.IPs)
	if strategy == string(api.LocalFirst) {
		return localFirst(m, local, remote, vipLocal, vipSet, endpoints)
	}
	union := slices.Sorted(maps.Keys(mergeSets(local, remote)))
	switch {
	case endpoints:
		return expectation{addrs: union, why: "RemoteAndLocal answers every cluster's ready endpoints"}
	case len(vipSet) > 0:
		return expectation{addrs: vipSet, why: "RemoteAndLocal answers the ServiceImport's VIP"}
	}
	return expectation{addrs: union, why: "RemoteAndLocal, with no VIP, answers every cluster's ready endpoints"}
}

// localFirst is LocalFirst's row of the table, with the import's
// min-ready-endpoints and failover-order.
func localFirst(m *memberState, local, remote map[string]string, vipLocal, vipSet []string, endpoints bool) expectation {
	minReady := 1
	if n, err := strconv.Atoi(m.imp.Annotations[api.AnnotationMinReadyEndpoints]); err == nil && n > 0 {
		minReady = n
	}
	useLocal := len(local) >= minReady || len(local) > 0 && len(remote) == 0
	switch {
	case useLocal && endpoints:
		return expectation{addrs: slices.Sorted(maps.Keys(local)), why: fmt.Sprintf("LocalFirst: %d ready local endpoints", len(local))}
	case useLocal:
		return expectation{addrs: vipLocal, why: fmt.Sprintf("LocalFirst: %d ready local endpoints, so the local Service's VIP", len(local))}
	case len(remote) == 0:
		return expectation{skip: true, why: "LocalFirst with no ready endpoint anywhere: answered as the kubernetes plugin answers an endpoint-less service"}
	case endpoints:
		return expectation{addrs: failover(remote, m.imp.Annotations[api.AnnotationFailoverOrder], m.cluster), why: "LocalFirst: no ready local endpoint, so the other clusters'"}
	case len(vipSet) > 0:
		return expectation{addrs: vipSet, why: "LocalFirst: no ready local endpoint, so the ServiceImport's VIP"}
	}
	return expectation{addrs: slices.Sorted(maps.Keys(remote)), why: "LocalFirst: no ready local endpoint and no VIP, so the other clusters' endpoints"}
}

// failover is the remote endpoints the failover order picks: the first
// listed cluster with one, else every unlisted cluster's.
func failover(remote map[string]string, order, self string) []string {
	byCluster := map[string][]string{}
	for a, c := range remote {
		byCluster[c] = append(byCluster[c], a)
	}
	listed := map[string]bool{}
	for c := range strings.SplitSeq(order, ",") {
		c = strings.TrimSpace(c)
		listed[c] = true
		if c != self && len(byCluster[c]) > 0 {
			return slices.Sorted(slices.Values(byCluster[c]))
		}
	}
	var out []string
	for c, as := range byCluster {
		if !listed[c] {
			out = append(out, as...)
		}
	}
	slices.Sort(out)
	return out
}

// expectClusterset is what <svc>.<ns>.svc.clusterset.local should answer
// in m: the import's IPs, or for a headless import every cluster's ready
// endpoints (its own cluster's imported copies among them), the stale
// clusters' left out while a fresh one is left.
func expectClusterset(m *memberState, now time.Time) expectation {
	if m.imp.Spec.Type != mcsv1b1.Headless {
		return expectation{addrs: ipv4(m.imp.Spec.IPs), why: "the ServiceImport's spec.ips"}
	}
	all, fresh := readyAddresses(m.imported), map[string]string{}
	for a, c := range all {
		if !stale(m.leases[c], now) {
			fresh[a] = c
		}
	}
	if len(fresh) > 0 {
		all = fresh
	}
	return expectation{addrs: slices.Sorted(maps.Keys(all)), why: "a headless import: every cluster's ready endpoints"}
}

func mergeSets(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
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
