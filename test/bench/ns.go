package main

import (
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/miekg/dns"
)

// The NS contests ask the mcs process NS clusterset.local and A
// ns.dns.clusterset.local against its native A names, in the same
// alternating runs: any pod may send them, so they must cost about what a
// native A query does (README.md, Performance).
var (
	nsApex = querySet{file: "ns.queries", qtype: dns.TypeNS, count: one,
		name: func(options, int) string { return "clusterset.local." }}
	nsServer = querySet{file: "ns-dns.queries", qtype: dns.TypeA, count: one,
		name: func(options, int) string { return nsName }}
)

const nsName = "ns.dns.clusterset.local."

func one(options) int { return 1 }

// answersNS: NOERROR with the one NS record, ns.dns.clusterset.local, and
// its glue, an address record for each of glue.
func answersNS(glue []net.IP) expectation {
	return func(r *dns.Msg, _ int) error {
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return fmt.Errorf("%s with %d answers, want NOERROR with NS %s", dns.RcodeToString[r.Rcode], len(r.Answer), nsName)
		}
		if ns, ok := r.Answer[0].(*dns.NS); !ok || ns.Ns != nsName {
			return fmt.Errorf("answer %s, want NS %s", r.Answer[0], nsName)
		}
		return sameAddrs("glue", r.Extra, glue)
	}
}

// answersGlue: NOERROR with an A record for each of glue, and no other.
func answersGlue(glue []net.IP) expectation {
	return func(r *dns.Msg, _ int) error {
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("%s, want NOERROR", dns.RcodeToString[r.Rcode])
		}
		return sameAddrs("answer", r.Answer, glue)
	}
}

// sameAddrs checks that rrs are address records of ns.dns holding exactly
// want, in any order.
func sameAddrs(section string, rrs []dns.RR, want []net.IP) error {
	var got []string
	for _, rr := range rrs {
		switch a := rr.(type) {
		case *dns.A:
			got = append(got, a.Hdr.Name+" "+a.A.String())
		case *dns.AAAA:
			got = append(got, a.Hdr.Name+" "+a.AAAA.String())
		default:
			got = append(got, rr.String())
		}
	}
	var wanted []string
	for _, ip := range want {
		wanted = append(wanted, nsName+" "+ip.String())
	}
	slices.Sort(got)
	slices.Sort(wanted)
	if !slices.Equal(got, wanted) {
		return fmt.Errorf("%s %q, want %q", section, got, wanted)
	}
	return nil
}

// glueAddr is an address for the mcs process to listen on besides
// 127.0.0.1: ns.dns answers the non-loopback addresses the server listens
// on (plugin/mcs/README.md, clusterset.local), and without one it would
// have no glue. The first IPv4 address of an interface that is up and not
// loopback (the contest asks A); queries still go to 127.0.0.1.
func glueAddr() (net.IP, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.IsGlobalUnicast() && n.IP.To4() != nil {
				return n.IP.To4(), nil
			}
		}
	}
	return nil, errors.New("no interface that is up has an IPv4 address for the mcs process to listen on, which A ns.dns.clusterset.local answers")
}
