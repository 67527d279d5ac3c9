package main

import (
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func nsReply(answer, extra []string) *dns.Msg {
	m := new(dns.Msg)
	for _, s := range answer {
		m.Answer = append(m.Answer, mustRR(s))
	}
	for _, s := range extra {
		m.Extra = append(m.Extra, mustRR(s))
	}
	return m
}

func mustRR(s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return rr
}

// The NS contests run only on answers that name ns.dns and carry exactly
// the server's address as glue.
func TestNSExpectations(t *testing.T) {
	glue := []net.IP{net.ParseIP("192.0.2.2").To4()}
	ns := "clusterset.local. 5 IN NS ns.dns.clusterset.local."
	a := "ns.dns.clusterset.local. 5 IN A 192.0.2.2"
	cases := []struct {
		name   string
		expect expectation
		reply  *dns.Msg
		ok     bool
	}{
		{"NS with glue", answersNS(glue), nsReply([]string{ns}, []string{a}), true},
		{"NS without glue", answersNS(glue), nsReply([]string{ns}, nil), false},
		{"NS naming another server", answersNS(glue), nsReply([]string{"clusterset.local. 5 IN NS ns.example.org."}, []string{a}), false},
		{"NS with glue of another address", answersNS(glue), nsReply([]string{ns}, []string{"ns.dns.clusterset.local. 5 IN A 10.0.0.1"}), false},
		{"NS with glue and more", answersNS(glue), nsReply([]string{ns}, []string{a, "ns.dns.clusterset.local. 5 IN AAAA fd00::2"}), false},
		{"A ns.dns", answersGlue(glue), nsReply([]string{a}, nil), true},
		{"A ns.dns without address", answersGlue(glue), nsReply(nil, nil), false},
		{"A of another name", answersGlue(glue), nsReply([]string{"other.clusterset.local. 5 IN A 192.0.2.2"}, nil), false},
	}
	for _, c := range cases {
		err := c.expect(c.reply, 0)
		if (err == nil) != c.ok {
			t.Errorf("%s: accepted %v (%v), want %v", c.name, err == nil, err, c.ok)
		}
	}
	servfail := nsReply([]string{ns}, []string{a})
	servfail.Rcode = dns.RcodeServerFailure
	if err := answersNS(glue)(servfail, 0); err == nil || !strings.Contains(err.Error(), "SERVFAIL") {
		t.Errorf("a SERVFAIL with records passed: %v", err)
	}
}
