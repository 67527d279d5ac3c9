package main

import (
	"context"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// side is one process of a query comparison and the address each of its
// answers must hold, by service number.
type side struct {
	name       string
	srv        *server
	native     func(i int) string // svc-<i>.<ns>.svc.cluster.local
	clusterset func(i int) string // svc-<i>.<ns>.svc.clusterset.local
}

// zone is one of the two query sets.
type zone struct {
	name   string // as in the table
	domain string
	want   func(side, int) string
	count  func(options) int // names: svc-0 to svc-<count-1>
}

var zones = []zone{
	{
		name: "native A (cluster.local)", domain: "cluster.local",
		want:  func(s side, i int) string { return s.native(i) },
		count: func(o options) int { return o.native },
	},
	{
		name: "clusterset A (clusterset.local)", domain: "clusterset.local",
		want:  func(s side, i int) string { return s.clusterset(i) },
		count: func(o options) int { return o.services },
	},
}

func qname(o options, z zone, i int) string {
	return fmt.Sprintf("%s.%s.svc.%s.", serviceName(i), o.namespace, z.domain)
}

const verifyWorkers = 8

// verify asks side every name of both zones once and checks that each
// answer is NOERROR with exactly the expected A record, so that neither side
// gains throughput by answering errors, or by being answered by the other
// plugin.
func verify(ctx context.Context, o options, s side) error {
	c := &dns.Client{Timeout: 2 * time.Second}
	for _, z := range zones {
		start := time.Now()
		var (
			mu    sync.Mutex
			bad   int
			first error
		)
		n := z.count(o)
		err := parallel(ctx, verifyWorkers, n, nil, func(i int) error {
			if err := check(c, s.srv.addr(), qname(o, z, i), z.want(s, i)); err != nil {
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
			return fmt.Errorf("%s, %s: %d of %d answers are wrong, e.g. %v", s.name, z.name, bad, n, first)
		}
		log.Printf("%s, %s: all %d answers right (%s)", s.name, z.name, n, time.Since(start).Round(time.Millisecond))
	}
	return nil
}

func check(c *dns.Client, addr, name, want string) error {
	m := new(dns.Msg).SetQuestion(name, dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
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
