package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// answerOf is a set of addresses as the benchmark compares them: sorted,
// comma-separated.
func answerOf(addrs []string) string {
	s := slices.Clone(addrs)
	slices.Sort(s)
	return strings.Join(s, ",")
}

// resolver queries member2's coredns-mcs.
type resolver struct {
	addr   string
	client *dns.Client
}

// queryTimeout bounds one query; pollEvery is the pause between two polls
// of one name, which bounds the resolution of the DNS times.
const (
	queryTimeout = 200 * time.Millisecond
	pollEvery    = time.Millisecond
)

func newResolver(addr string) *resolver {
	return &resolver{addr: addr, client: &dns.Client{Timeout: queryTimeout}}
}

// fqdn is service i's native name.
func fqdn(i int, namespace string) string {
	return fmt.Sprintf("%s.%s.svc.cluster.local.", serviceName(i), namespace)
}

// answer is the A answer for name as answerOf gives it, or the rcode when
// it is not NOERROR, or the error.
func (r *resolver) answer(ctx context.Context, name string) string {
	in, _, err := r.client.ExchangeContext(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA), r.addr)
	if err != nil {
		return "error: " + err.Error()
	}
	if in.Rcode != dns.RcodeSuccess {
		return dns.RcodeToString[in.Rcode]
	}
	var addrs []string
	for _, rr := range in.Answer {
		if a, ok := rr.(*dns.A); ok {
			addrs = append(addrs, a.A.String())
		}
	}
	return answerOf(addrs)
}

// poll queries name every pollEvery until the answer is want, and returns
// when it first was; the error says what it answered instead.
func (r *resolver) poll(ctx context.Context, name, want string) (time.Time, error) {
	for {
		got := r.answer(ctx, name)
		if got == want {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s answers %q, want %q: %w", name, got, want, context.Cause(ctx))
		case <-time.After(pollEvery):
		}
	}
}
