package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
)

// side is one process of a contest, the names it is asked and what each
// answer must be.
type side struct {
	name    string
	srv     *server
	queries querySet
	expect  expectation
}

// querySet is the names a contest asks, one query of type qtype each.
type querySet struct {
	file  string // the query file, in -out
	qtype uint16
	name  func(o options, i int) string
	count func(o options) int
}

var (
	nativeNames = querySet{file: "native.queries", qtype: dns.TypeA, count: func(o options) int { return o.native },
		name: func(o options, i int) string { return fqdn(benchfixture.ServiceName(i), o.namespace, "cluster.local") }}
	clustersetNames = querySet{file: "clusterset.queries", qtype: dns.TypeA, count: func(o options) int { return o.services },
		name: func(o options, i int) string {
			return fqdn(benchfixture.ServiceName(i), o.namespace, "clusterset.local")
		}}
	plainNames = querySet{file: "plain.queries", qtype: dns.TypeA, count: func(o options) int { return o.plain },
		name: func(o options, i int) string { return fqdn(plainName(i), o.namespace, "cluster.local") }}
)

func fqdn(service, namespace, zone string) string {
	return fmt.Sprintf("%s.%s.svc.%s.", service, namespace, zone)
}

// expectation checks the answer to name number i of a query set.
type expectation func(r *dns.Msg, i int) error

// answersA: NOERROR with exactly one A record, holding want(i).
func answersA(want func(i int) string) expectation {
	return func(r *dns.Msg, i int) error {
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return fmt.Errorf("%s with %d answers, want NOERROR with A %s", dns.RcodeToString[r.Rcode], len(r.Answer), want(i))
		}
		if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != want(i) {
			return fmt.Errorf("answer %s, want A %s", r.Answer[0], want(i))
		}
		return nil
	}
}

// answersNOERROR accepts any NOERROR: whoami answers every name alike.
func answersNOERROR(r *dns.Msg, _ int) error {
	if r.Rcode != dns.RcodeSuccess {
		return fmt.Errorf("%s, want NOERROR", dns.RcodeToString[r.Rcode])
	}
	return nil
}

const verifyWorkers = 8

// verify asks each side every name of its query set once and checks each
// answer, so that neither side gains throughput by answering errors, or by
// being answered by another plugin.
func verify(ctx context.Context, o options, c *contest) error {
	cl := &dns.Client{Timeout: 2 * time.Second}
	for _, s := range c.sides {
		start := time.Now()
		var (
			mu    sync.Mutex
			bad   int
			first error
		)
		n := s.queries.count(o)
		err := parallel(ctx, verifyWorkers, n, nil, func(i int) error {
			if err := ask(cl, s.srv.addr(), s.queries.name(o, i), s.queries.qtype, s.expect, i); err != nil {
				mu.Lock()
				bad++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
			return nil
		})
		if err != nil {
			return err
		}
		if bad > 0 {
			return fmt.Errorf("%s, %s: %d of %d answers are wrong, e.g. %v", c.name, s.name, bad, n, first)
		}
		log.Printf("%s, %s: all %d answers right (%s)", c.name, s.name, n, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// ask sends addr a query of name, number i of its query set, and checks
// the answer.
func ask(c *dns.Client, addr, name string, qtype uint16, expect expectation, i int) error {
	m := new(dns.Msg).SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := expect(r, i); err != nil {
		return fmt.Errorf("%s %s: %w", name, dns.TypeToString[qtype], err)
	}
	return nil
}
