package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/labnet"
)

// The client plays a pod of member2 calling serve by name: it resolves the
// name through member2's coredns-mcs and connects, from member2's node, to
// the address it got, a Service's virtual IP, which member2's kube-proxy
// sends on to one pod.

// Reply is what one request of the client in member2's place got.
type Reply struct {
	At      time.Time // when it came back
	Addr    string    // the address member2's coredns-mcs answered
	Text    string    // the reply, or what went wrong
	Cluster string    // the cluster the reply says it came from; "" when it failed
	Pod     string    // the pod that replied
}

func (r Reply) String() string { return fmt.Sprintf("%-14s %s", r.Addr, r.Text) }

// resolver is the coredns-mcs the client asks, and the port it then
// connects to: serve's for a VIP answer, the pods' for endpoints.
type resolver struct {
	dns  string // host:port
	port int
}

// lookup asks the coredns-mcs at addr for the A records of name.
func lookup(ctx context.Context, addr, name string) ([]string, error) {
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA), addr)
	if err != nil {
		return nil, fmt.Errorf("coredns-mcs at %s, %s A: %w", addr, name, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("coredns-mcs at %s, %s A: %s", addr, name, dns.RcodeToString[r.Rcode])
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return sortIPs(ips), nil
}

// ask is one request of a client in member2's place: resolve name through
// the resolver and GET the address it answered from member2's node, on a
// new connection.
func (s *story) ask(ctx context.Context, name string) Reply {
	failed := func(addr string, err error) Reply {
		return Reply{At: time.Now(), Addr: addr, Text: "error: " + err.Error()}
	}
	if err := s.servers.Err(); err != nil {
		return failed("-", fmt.Errorf("playing the pods: %w", err))
	}
	addrs, err := lookup(ctx, s.via.dns, name)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return failed("-", err)
	}
	addr := addrs[0]
	body, err := labnet.Node(member2).Get(ctx, "http://"+net.JoinHostPort(addr, strconv.Itoa(s.via.port))+"/", time.Second)
	if err != nil {
		return failed(addr, err)
	}
	r := Reply{At: time.Now(), Addr: addr, Text: body}
	r.Cluster, r.Pod, _ = labnet.Replier(body)
	return r
}

// requests asks for name every interval for d, printing each reply.
func (s *story) requests(ctx context.Context, name string, d, interval time.Duration) []Reply {
	var replies []Reply
	for end := time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; {
		r := s.ask(ctx, name)
		s.say("  %s", r)
		replies = append(replies, r)
		time.Sleep(interval)
	}
	return replies
}

// split asks for name n times without pause and prints how many replies
// came from each cluster.
func (s *story) split(ctx context.Context, name string, n int) []Reply {
	var replies []Reply
	count := map[string]int{}
	for range n {
		r := s.ask(ctx, name)
		replies = append(replies, r)
		count[cmp.Or(r.Cluster, "(failed)")]++
	}
	for _, c := range []string{member1, member2, "(failed)"} {
		if count[c] > 0 {
			s.say("  %-9s %3d of %d connections", c, count[c], n)
		}
	}
	return replies
}

// scale scales cluster's serve to replicas, then asks for the native name
// without pause until a reply comes from cluster want (through one of vips,
// unless nil), printing each change of the address or of the cluster that
// replies (or of a failure) with the time since the scale command started.
// It returns the replies and that time.
func (s *story) scale(ctx context.Context, cluster string, replicas int, want string, vips []string) ([]Reply, time.Duration, error) {
	start := time.Now()
	if err := s.kubectl(ctx, "--context", cluster, "-n", namespace, "scale", "deployment/serve", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		return nil, 0, err
	}
	s.say("  +%.3fs  (the command has returned)", time.Since(start).Seconds())
	var replies []Reply
	same := 0
	for i := 0; ; i++ {
		r := s.ask(ctx, nativeName)
		replies = append(replies, r)
		if i > 0 && r.Cluster == replies[i-1].Cluster && r.Addr == replies[i-1].Addr {
			same++
		} else {
			if same > 0 {
				s.say("           (%d more like it)", same)
			}
			same = 0
			s.say("  +%.3fs  %s", r.At.Sub(start).Seconds(), r)
		}
		if r.Cluster == want && (vips == nil || slices.Contains(vips, r.Addr)) {
			after := r.At.Sub(start)
			s.say("==> replies came from %s %.3fs after the scale command", want, after.Seconds())
			return replies, after, nil
		}
		if time.Since(start) > switchTimeout || ctx.Err() != nil {
			return replies, 0, fmt.Errorf("no reply from %s within %s of the scale command; last: %s", want, switchTimeout, r)
		}
		time.Sleep(switchPoll)
	}
}

const (
	// switchPoll is the pause between requests while a switch is timed.
	switchPoll = 10 * time.Millisecond
	// switchTimeout bounds a switch: seconds in practice.
	switchTimeout = time.Minute
)
