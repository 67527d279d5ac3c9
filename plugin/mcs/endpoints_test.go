package mcs

import (
	"net"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// An endpoint without a hostname is named by its address as the slice
// spells it, dashed (as the kubernetes plugin names it); a slice keeps
// names only when one is not worked out so from the address.
func TestEndpointNames(t *testing.T) {
	cases := []struct {
		addr, hostname, want string
		kept                 bool
	}{
		{addr: "10.2.0.5", want: "10-2-0-5"},
		{addr: "fd00::", want: "fd00--0"},
		{addr: "fd00::1", want: "fd00--1"},
		{addr: "FD00::1", want: "fd00--1"},
		{addr: "fd00:0::2", want: "fd00-0--2", kept: true},
		{addr: "::ffff:10.2.0.8", want: "--ffff-10-2-0-8", kept: true},
		{addr: "10.2.0.6", hostname: "Web-0", want: "web-0", kept: true},
	}
	for _, c := range cases {
		d := discoveryv1.Endpoint{Addresses: []string{c.addr}}
		if c.hostname != "" {
			d.Hostname = &c.hostname
		}
		var s endpointSlice
		s.setEndpoints([]discoveryv1.Endpoint{d}, false)
		if s.count() != 1 {
			t.Fatalf("%s: %d endpoints kept, want 1", c.addr, s.count())
		}
		e := s.endpoint(0)
		if got := e.hostname(); got != c.want || !e.named(c.want) || e.named(c.want+"x") {
			t.Errorf("%s (hostname %q): named %q, want %q", c.addr, c.hostname, got, c.want)
		}
		if (s.hosts != nil) != c.kept {
			t.Errorf("%s (hostname %q): names kept: %v, want %v", c.addr, c.hostname, s.hosts != nil, c.kept)
		}
		if want := parseIP(c.addr); !e.ip.Equal(want) || len(e.ip) != len(want) {
			t.Errorf("%s: address %v (%d bytes), want %v as parseIP gives it", c.addr, e.ip, len(e.ip), want)
		}
	}
}

// A slice of IPv4 endpoints keeps 4 bytes an address; one that holds an
// IPv6 address keeps 16 for each, and still answers IPv4 ones as IPv4.
func TestEndpointWidth(t *testing.T) {
	v4 := toSlice(localSlice("demo", "web", "a", nil, ep{ip: "10.2.0.5"}, ep{ip: "10.2.0.6", notReady: true}, ep{ip: "::ffff:10.2.0.7"}, ep{ip: "fe80::1%eth0"}), false)
	if v4.wide || len(v4.addrs) != 2*net.IPv4len || v4.count() != 2 {
		t.Fatalf("IPv4 slice keeps %d bytes for %d endpoints (wide %v), want 8 for 2", len(v4.addrs), v4.count(), v4.wide)
	}
	mixed := toSlice(localSlice("demo", "web", "b", nil, ep{ip: "fd00::5"}, ep{ip: "10.2.0.5"}), false)
	var got []string
	for e := range mixed.all() {
		got = append(got, e.ip.String())
		if len(e.ip) != len(parseIP(e.ip.String())) {
			t.Errorf("%v lent as %d bytes", e.ip, len(e.ip))
		}
	}
	if !mixed.wide || mixed.count() != 2 || !equal(got, "fd00::5", "10.2.0.5") {
		t.Fatalf("mixed slice: wide %v, endpoints %v", mixed.wide, got)
	}
}
