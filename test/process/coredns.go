package process

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/miekg/dns"
)

// CoreDNS is the Config of a CoreDNS build (bin/coredns-mcs) serving the
// Corefile at corefile; env holds the variables the Corefile refers to.
func CoreDNS(name, binary, corefile, log string, env ...string) Config {
	return Config{Name: name, Binary: binary, Args: []string{"-conf", corefile}, Env: env, Log: log}
}

// CoreDNSServing is nil once the server at dnsAddr answers a query, whatever
// its rcode: CoreDNS has started its servers.
func CoreDNSServing(dnsAddr string) Probe { return DNSAnswers(dnsAddr, ".", dns.TypeNS) }

// CoreDNSReady is nil once the server at dnsAddr answers and the ready
// plugin's readyURL (http://host:port/ready) says 200. DNS goes first:
// ready's endpoint listens before the plugins have registered with it, and
// says 200 in between.
func CoreDNSReady(dnsAddr, readyURL string) Probe {
	return All(CoreDNSServing(dnsAddr), HTTPOK(readyURL))
}

// ErrPortTaken says that a port picked for CoreDNS was taken by someone
// else before CoreDNS bound it: pick ports again and retry.
var ErrPortTaken = errors.New("a port picked for coredns was taken meanwhile")

// StartCoreDNS starts cfg and waits up to timeout until the server at
// dnsAddr answers (its plugins may not be ready yet: wait for CoreDNSReady
// for that). When it does not, the process is stopped and returned with
// the error (its Output says why), which wraps ErrPortTaken when CoreDNS
// said an address was in use.
func StartCoreDNS(ctx context.Context, cfg Config, dnsAddr string, timeout time.Duration) (*Process, error) {
	p, err := Start(cfg)
	if err != nil {
		return nil, err
	}
	if err := p.WaitFor(ctx, timeout, CoreDNSServing(dnsAddr)); err != nil {
		_ = p.Stop(StopGrace)
		if strings.Contains(p.Output(), "address already in use") {
			err = fmt.Errorf("%w: %v", ErrPortTaken, err)
		}
		return p, err
	}
	return p, nil
}

// portAttempts is how many times StartCoreDNSOnFreePorts picks ports.
const portAttempts = 3

// StartCoreDNSOnFreePorts picks n free loopback ports, has configure make
// the Config and the DNS address that use them, and starts it as
// StartCoreDNS does. When a port was taken before CoreDNS bound it, it
// picks ports again (three times in all). It returns the ports the server
// was started on.
func StartCoreDNSOnFreePorts(ctx context.Context, n int, timeout time.Duration, configure func(ports []int) (cfg Config, dnsAddr string, err error)) (*Process, []int, error) {
	for attempt := 1; ; attempt++ {
		ports, err := loopback.FreePorts(n)
		if err != nil {
			return nil, nil, err
		}
		cfg, dnsAddr, err := configure(ports)
		if err != nil {
			return nil, nil, err
		}
		p, err := StartCoreDNS(ctx, cfg, dnsAddr, timeout)
		if errors.Is(err, ErrPortTaken) && attempt < portAttempts {
			continue
		}
		return p, ports, err
	}
}
