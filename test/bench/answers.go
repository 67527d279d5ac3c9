package main

import (
	"bytes"
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
)

// The answer comparison: whether the shipped member Corefile's labels line
// (importedSlicesSelector) changes any answer. Every name a client can ask
// about the namespace's objects is sent to the member Corefile's process
// and to the same Corefile without the line, and the full responses are
// compared.

// dnsQuery is one question of the corpus.
type dnsQuery struct {
	name  string
	qtype uint16
}

func (q dnsQuery) String() string { return dns.TypeToString[q.qtype] + " " + q.name }

// answerDiff is a question the two processes answer differently.
type answerDiff struct {
	q             dnsQuery
	without, with string // the answer without the labels line, and the shipped Corefile's
}

// answerComparison is the outcome: how many questions were compared, about
// how many of the fixture's svc-<i>, and which differ.
type answerComparison struct {
	queries, services int
	differ            []answerDiff
}

// answerWorkers ask in parallel: tens of thousands of questions, each
// answered from memory in microseconds, would otherwise wait on the
// round trips.
const answerWorkers = 8

// compareAnswers asks every question of the corpus of without (the member
// Corefile without its labels line) and with (the shipped one), and of
// stock too, whose answers it does not compare.
func compareAnswers(ctx context.Context, o options, w *world, without, with, stock *server) (answerComparison, error) {
	qs, sampled, err := w.answerCorpus(ctx)
	if err != nil {
		return answerComparison{}, err
	}
	log.Printf("comparing the answers of %s and %s to %d questions", without.Name(), with.Name(), len(qs))
	res := answerComparison{queries: len(qs), services: sampled}
	var mu sync.Mutex
	err = parallel(ctx, answerWorkers, len(qs), newProgress("questions compared", len(qs)), func(i int) error {
		a, err := exchange(qs[i], without.addr())
		if err != nil {
			return err
		}
		b, err := exchange(qs[i], with.addr())
		if err != nil {
			return err
		}
		// Asked the same, stock's cache holds what the shipped one's does,
		// and the memory after load compares like with like.
		if _, err := exchange(qs[i], stock.addr()); err != nil {
			return err
		}
		if !bytes.Equal(normalised(a), normalised(b)) {
			mu.Lock()
			res.differ = append(res.differ, answerDiff{qs[i], summary(a), summary(b)})
			mu.Unlock()
		}
		return nil
	})
	slices.SortFunc(res.differ, func(x, y answerDiff) int { return strings.Compare(x.q.String(), y.q.String()) })
	if err == nil {
		err = writeDiffs(filepath.Join(o.outDir, "answers.diff"), res.differ)
	}
	log.Printf("%d of %d answers differ", len(res.differ), len(qs))
	return res, err
}

// exchange asks q over UDP, as a pod's resolver does, and again over TCP
// when the answer is truncated, so that the whole answer is compared.
func exchange(q dnsQuery, addr string) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	var last error
	for _, proto := range []string{"udp", "udp", "udp", "tcp"} {
		c := &dns.Client{Net: proto, Timeout: 2 * time.Second}
		r, _, err := c.Exchange(m, addr)
		if err == nil && !r.Truncated {
			return r, nil
		}
		last = err
	}
	return nil, fmt.Errorf("%s from %s: %w", q, addr, last)
}

// normalised is r packed with what must differ between any two processes
// set aside: the message ID; the SOA serial, which the kubernetes plugin
// sets to the time it last saw a change, so two replicas differ by
// seconds; and the order of records within a section, which loadbalance
// shuffles per answer.
func normalised(r *dns.Msg) []byte {
	m := r.Copy()
	m.Id = 0
	for _, sec := range [][]dns.RR{m.Answer, m.Ns, m.Extra} {
		for _, rr := range sec {
			if soa, ok := rr.(*dns.SOA); ok {
				soa.Serial = 0
			}
		}
		slices.SortFunc(sec, func(a, b dns.RR) int { return strings.Compare(a.String(), b.String()) })
	}
	b, err := m.Pack()
	if err != nil {
		return []byte("unpackable: " + err.Error())
	}
	return b
}

// summary is r's code and answer records, for the report.
func summary(r *dns.Msg) string {
	var rrs []string
	for _, rr := range r.Answer {
		f := strings.Fields(rr.String())
		rrs = append(rrs, dns.TypeToString[rr.Header().Rrtype]+" "+f[len(f)-1])
	}
	slices.Sort(rrs)
	return strings.TrimSpace(dns.RcodeToString[r.Rcode] + " " + strings.Join(rrs, ", "))
}

func writeDiffs(path string, diffs []answerDiff) error {
	var b strings.Builder
	for _, d := range diffs {
		fmt.Fprintf(&b, "%s\n  without the labels line: %s\n  with it:                 %s\n", d.q, d.without, d.with)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// digits are what the kinds of differing names are told apart without.
var digits = regexp.MustCompile(`[0-9]+`)

// diffKind is the differing questions of one type and name shape: how
// many, and the first.
type diffKind struct {
	kind  string
	n     int
	first answerDiff
}

// diffKinds groups the differing questions by type and name with the
// numbers left out, in order.
func diffKinds(diffs []answerDiff) []diffKind {
	var out []diffKind
	index := map[string]int{}
	for _, d := range diffs {
		k := dns.TypeToString[d.q.qtype] + " " + digits.ReplaceAllString(d.q.name, "N")
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, diffKind{kind: k, first: d})
		}
		out[i].n++
	}
	return out
}

// corpus collects the questions, each once.
type corpus struct {
	ns   string
	seen map[dnsQuery]bool
	qs   []dnsQuery
}

func (c *corpus) add(name string, types ...uint16) {
	for _, t := range types {
		q := dnsQuery{dns.Fqdn(name), t}
		if !c.seen[q] {
			c.seen[q] = true
			c.qs = append(c.qs, q)
		}
	}
}

// service asks a service name of zone as clients do: A, AAAA and SRV of
// the name, and SRV of its port.
func (c *corpus) service(name, zone string) {
	base := fqdn(name, c.ns, zone)
	c.add(base, dns.TypeA, dns.TypeAAAA, dns.TypeSRV)
	c.add("_http._tcp."+base, dns.TypeSRV)
}

func (c *corpus) ptr(ip string) {
	if rev, err := dns.ReverseAddr(ip); err == nil {
		c.add(rev, dns.TypePTR)
	}
}

// svcPrefix is what the fixture's service names start with, their number
// after it.
var svcPrefix = strings.TrimSuffix(benchfixture.ServiceName(0), "0")

// answerCorpus is every name of the namespace's objects, of every svc-<i>
// a -compare-th: the others are the same shape. It returns how many
// svc-<i> were kept.
func (w *world) answerCorpus(ctx context.Context) ([]dnsQuery, int, error) {
	stride := max(1, w.opts.services/w.opts.compare)
	keep := func(name string) bool {
		n, ok := strings.CutPrefix(strings.TrimPrefix(name, api.DerivedPrefix), svcPrefix)
		i, err := strconv.Atoi(n)
		return !ok || err != nil || i%stride == 0
	}
	c := &corpus{ns: w.opts.namespace, seen: map[dnsQuery]bool{}}
	c.fixed()
	if err := w.eachObject(ctx, keep, c); err != nil {
		return nil, 0, err
	}
	return c.qs, (w.opts.services + stride - 1) / stride, nil
}

// fixed are the names that are about no one object.
func (c *corpus) fixed() {
	for _, z := range []string{"cluster.local", "clusterset.local"} {
		c.add(z, dns.TypeSOA, dns.TypeNS)
		c.add(c.ns+".svc."+z, dns.TypeA, dns.TypeSOA)
		c.service("missing", z)
	}
	c.add("dns-version.clusterset.local", dns.TypeTXT)
	c.add("ns.dns.cluster.local", dns.TypeA)
	c.add("ns.dns.clusterset.local", dns.TypeA)
	c.add("10-30-200-1."+c.ns+".pod.cluster.local", dns.TypeA)
	c.ptr("10.30.255.255")
}

// eachObject adds the names of every Service, ServiceImport and
// EndpointSlice of the namespace whose service keep accepts.
func (w *world) eachObject(ctx context.Context, keep func(string) bool, c *corpus) error {
	ns := w.opts.namespace
	lists := []struct {
		list pager.ListPageFunc
		add  func(runtime.Object)
	}{
		{w.listServices, func(obj runtime.Object) {
			if s := obj.(*corev1.Service); keep(s.Name) {
				c.serviceObject(s)
			}
		}},
		{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return w.mcs.MulticlusterV1beta1().ServiceImports(ns).List(ctx, o)
		}, func(obj runtime.Object) {
			if si := obj.(*mcsv1b1.ServiceImport); keep(si.Name) {
				c.importObject(si)
			}
		}},
		{func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return w.kube.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
		}, func(obj runtime.Object) {
			if s := obj.(*discoveryv1.EndpointSlice); keep(s.Labels[discoveryv1.LabelServiceName]) {
				c.sliceObject(s)
			}
		}},
	}
	for _, l := range lists {
		err := pager.New(l.list).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			l.add(obj)
			return nil
		})
		if err != nil {
			return fmt.Errorf("listing in %s: %w", ns, err)
		}
	}
	return nil
}

func (c *corpus) serviceObject(s *corev1.Service) {
	c.service(s.Name, "cluster.local")
	for _, ip := range s.Spec.ClusterIPs {
		c.ptr(ip)
	}
}

// importObject asks its clusterset name and its native one, which mcs
// answers when the import enables it and passes on when not.
func (c *corpus) importObject(si *mcsv1b1.ServiceImport) {
	c.service(si.Name, "clusterset.local")
	c.service(si.Name, "cluster.local")
	for _, ip := range si.Spec.IPs {
		c.ptr(ip)
	}
}

// sliceObject asks, per endpoint address, its reverse name and its name
// under the slice's Service (the hostname, else the address dashed), and
// for an imported slice its clusterset names too.
func (c *corpus) sliceObject(s *discoveryv1.EndpointSlice) {
	svc := s.Labels[discoveryv1.LabelServiceName]
	imported, cluster := s.Labels[mcsv1b1.LabelServiceName], s.Labels[mcsv1b1.LabelSourceCluster]
	c.service(svc, "cluster.local")
	for _, e := range s.Endpoints {
		for _, a := range e.Addresses {
			host := strings.ReplaceAll(strings.ReplaceAll(a, ".", "-"), ":", "-")
			if e.Hostname != nil {
				host = *e.Hostname
			}
			c.ptr(a)
			c.add(host+"."+fqdn(svc, c.ns, "cluster.local"), dns.TypeA)
			if imported != "" {
				c.add(cluster+"."+fqdn(imported, c.ns, "clusterset.local"), dns.TypeA)
				c.add(host+"."+cluster+"."+fqdn(imported, c.ns, "clusterset.local"), dns.TypeA)
			}
		}
	}
}
