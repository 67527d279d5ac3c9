package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// side is one process of a contest and the address each of its answers
// must hold, by name number.
type side struct {
	name string
	srv  *server
	want func(i int) string // nil: any NOERROR (whoami answers every name alike)
}

// querySet is the names a contest asks, one A query each.
type querySet struct {
	file  string // the query file, in -out
	name  func(o options, i int) string
	count func(o options) int
}

var (
	nativeNames = querySet{file: "native.queries", count: func(o options) int { return o.native },
		name: func(o options, i int) string { return fqdn(serviceName(i), o.namespace, "cluster.local") }}
	clustersetNames = querySet{file: "clusterset.queries", count: func(o options) int { return o.services },
		name: func(o options, i int) string { return fqdn(serviceName(i), o.namespace, "clusterset.local") }}
	plainNames = querySet{file: "plain.queries", count: func(o options) int { return o.plain },
		name: func(o options, i int) string { return fqdn(plainName(i), o.namespace, "cluster.local") }}
)

func fqdn(service, namespace, zone string) string {
	return fmt.Sprintf("%s.%s.svc.%s.", service, namespace, zone)
}

const verifyWorkers = 8

// verify asks each side every name of c once and checks that each answer
// is NOERROR with exactly the expected A record, so that neither side gains
// throughput by answering errors, or by being answered by another plugin.
func verify(ctx context.Context, o options, c *contest) error {
	cl := &dns.Client{Timeout: 2 * time.Second}
	for _, s := range c.sides {
		start := time.Now()
		var (
			mu    sync.Mutex
			bad   int
			first error
		)
		n := c.queries.count(o)
		err := parallel(ctx, verifyWorkers, n, nil, func(i int) error {
			want := ""
			if s.want != nil {
				want = s.want(i)
			}
			if err := check(cl, s.srv.addr(), c.queries.name(o, i), want); err != nil {
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

// check asks name; want "" accepts any NOERROR.
func check(c *dns.Client, addr, name, want string) error {
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if want == "" {
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("%s: %s, want NOERROR", name, dns.RcodeToString[r.Rcode])
		}
		return nil
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: %s with %d answers, want NOERROR with A %s", name, dns.RcodeToString[r.Rcode], len(r.Answer), want)
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok || a.A.String() != want {
		return fmt.Errorf("%s: answer %s, want A %s", name, r.Answer[0], want)
	}
	return nil
}
