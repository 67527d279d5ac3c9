package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// The client plays a pod of member2 calling serve by its native name.

// helloRE reads the cluster out of a reply of the seeds' serve image.
var helloRE = regexp.MustCompile(`^hello from cluster (\S+) \(Node: \S+ Pod: \S+ Address: \S+\)$`)

// Reply is what one request of the client in member2's place got.
type Reply struct {
	At      time.Time // when it came back
	Addr    string    // the address member2's coredns-mcs answered
	Text    string    // the reply, or what went wrong
	Cluster string    // the cluster the reply says it came from; "" when it failed
}

func (r Reply) String() string { return fmt.Sprintf("%-12s %s", r.Addr, r.Text) }

// lookup asks cluster's coredns-mcs for the A records of name.
func (s *story) lookup(ctx context.Context, cluster, name string) ([]string, error) {
	c := &dns.Client{Timeout: time.Second}
	r, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(name), dns.TypeA), s.coredns[cluster].dns)
	if err != nil {
		return nil, fmt.Errorf("%s's coredns-mcs, %s A: %w", cluster, name, err)
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s's coredns-mcs, %s A: %s", cluster, name, dns.RcodeToString[r.Rcode])
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return sortIPs(ips), nil
}

// ask is one request of a client in member2's place: resolve serve's
// native name through member2's coredns-mcs, take the i-th answer in turn
// (as a resolver's round robin would), and GET it from inside the
// namespace. Without a namespace there is no request: the reply names the
// pod that owns the answered address.
func (s *story) ask(ctx context.Context, i int) Reply {
	failed := func(addr string, err error) Reply {
		return Reply{At: time.Now(), Addr: addr, Text: "error: " + err.Error()}
	}
	running, err := s.pods.running()
	if err == nil && s.servers != nil {
		err = s.servers.sync(running)
	}
	if err != nil {
		return failed("-", err)
	}
	addrs, err := s.lookup(ctx, member2, nativeName)
	if err == nil && len(addrs) == 0 {
		err = errors.New("no address")
	}
	if err != nil {
		return failed("-", err)
	}
	addr := addrs[i%len(addrs)]
	if s.servers == nil {
		for _, p := range running {
			if p.ip == addr {
				return Reply{At: time.Now(), Addr: addr, Cluster: p.cluster, Text: "(DNS only) pod " + p.name + " of " + p.cluster}
			}
		}
		return failed(addr, errors.New("no running pod has this address"))
	}
	body, err := s.get(ctx, "http://"+net.JoinHostPort(addr, strconv.Itoa(podPort))+"/")
	if err != nil {
		return failed(addr, err)
	}
	r := Reply{At: time.Now(), Addr: addr, Text: body}
	if m := helloRE.FindStringSubmatch(body); m != nil {
		r.Cluster = m[1]
	}
	return r
}

func (s *story) get(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body)), err
}

// requests asks every interval for d, printing each reply.
func (s *story) requests(ctx context.Context, d, interval time.Duration) []Reply {
	var replies []Reply
	for i, end := 0, time.Now().Add(d); time.Now().Before(end) && ctx.Err() == nil; i++ {
		r := s.ask(ctx, i)
		s.say("  %s", r)
		replies = append(replies, r)
		time.Sleep(interval)
	}
	return replies
}

// scaleMember2 scales member2's serve to replicas, then asks without pause
// until a reply comes from cluster want, printing each change of the
// cluster that replies (or of a failure) with the time since the scale
// command started. It returns the replies and that time.
func (s *story) scaleMember2(ctx context.Context, replicas int, want string) ([]Reply, time.Duration, error) {
	start := time.Now()
	if err := s.kubectl(ctx, "--context", member2, "-n", namespace, "scale", "deployment/serve", fmt.Sprintf("--replicas=%d", replicas)); err != nil {
		return nil, 0, err
	}
	s.say("  +%.3fs  (the command has returned)", time.Since(start).Seconds())
	var replies []Reply
	same := 0
	for i := 0; ; i++ {
		r := s.ask(ctx, i)
		replies = append(replies, r)
		if i > 0 && r.Cluster == replies[i-1].Cluster {
			same++
		} else {
			if same > 0 {
				s.say("           (%d more like it)", same)
			}
			same = 0
			s.say("  +%.3fs  %s", r.At.Sub(start).Seconds(), r)
		}
		if r.Cluster == want {
			after := r.At.Sub(start)
			s.say("==> replies came from %s %.2fs after the scale command", want, after.Seconds())
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
