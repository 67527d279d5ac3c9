package mcs

import (
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func TestIndexFollowsDeletesAndMoves(t *testing.T) {
	x := newIndex("", false)
	x.self = self
	svc := toService(serviceObj("demo", "serve", []string{vipLocal}))
	imp := &serviceImport{objMeta: newMeta("demo", "serve", ""), strategy: api.LocalFirst}
	a := toSlice(localSlice("demo", "serve", "a", nil, ep{ip: "10.1.0.2"}, ep{ip: localIP}), false)
	b := toSlice(localSlice("demo", "serve", "b", nil, ep{ip: "10.1.0.3"}), false)
	x.setService(nil, svc)
	x.setSlice(nil, b)
	if x.view("demo", "serve") != nil {
		t.Fatal("a service without import has a view: nothing reads it")
	}
	x.setImport(nil, imp)
	x.setSlice(nil, a)
	v := x.view("demo", "serve")
	if !v.native() || len(v.local()) != 2 || v.local()[0].name() != "a" {
		t.Fatalf("view %+v", v)
	}
	a2 := toSlice(localSlice("demo", "serve", "a", nil, ep{ip: "10.1.0.4"}), false)
	x.setSlice(a, a2)
	if v := x.view("demo", "serve"); len(v.local()) != 2 || v.local()[0] != a2 {
		t.Fatalf("a slice's new version must replace the old one: view %+v", v)
	}
	a = a2
	other := &serviceImport{objMeta: newMeta("demo", "other", ""), strategy: api.LocalFirst}
	x.setImport(nil, other)
	moved := toSlice(localSlice("demo", "other", "a", nil, ep{ip: localIP}), false)
	x.setSlice(a, moved)
	if len(x.view("demo", "serve").local()) != 1 || len(x.view("demo", "other").local()) != 1 {
		t.Fatal("a slice whose service label changed must move")
	}
	x.setImport(imp, nil)
	if x.view("demo", "serve") != nil {
		t.Fatal("a service whose import is gone keeps its view")
	}
	x.setImport(nil, imp)
	if v := x.view("demo", "serve"); !v.native() || len(v.local()) != 1 {
		t.Fatalf("an import that comes back must see the service's objects: view %+v", v)
	}
	drained := toSlice(localSlice("demo", "serve", "b", nil, ep{ip: "10.1.0.3", notReady: true}), false)
	x.setSlice(b, drained)
	if v := x.view("demo", "serve"); len(v.local()) != 0 {
		t.Fatalf("a slice without a ready endpoint is still answered from: view %+v", v)
	}
	x.setSlice(drained, b)
	if v := x.view("demo", "serve"); len(v.local()) != 1 || v.local()[0] != b {
		t.Fatalf("a slice whose endpoint is ready again is not answered from: view %+v", v)
	}
	x.setSlice(b, nil)
	x.setService(svc, nil)
	x.setImport(imp, nil)
	if v := x.views[svcKey{"demo", "serve"}]; v != nil {
		t.Fatalf("a service without objects must leave the index: %+v", v)
	}
	x.setNamespace(nil, &namespace{newMeta("", "demo", "")})
	x.setNamespace(&namespace{newMeta("", "demo", "")}, nil)
	if x.hasNamespace("demo") {
		t.Fatal("deleted namespace still known")
	}
}

func TestBoundIPs(t *testing.T) {
	noInterfaces := func() []string { t.Fatal("interfaces listed for bound addresses"); return nil }
	got := boundIPs([]string{"127.0.0.1", "10.0.0.10", "fd00::10", "::1"}, noInterfaces)
	if len(got) != 2 || !got[0].Equal(net.ParseIP("10.0.0.10")) || family(got[0]) != dns.TypeA || !got[1].Equal(net.ParseIP("fd00::10")) {
		t.Fatalf("bound IPs %v, want [10.0.0.10 fd00::10]", got)
	}
	// Listening on every address: every interface address but loopback, in
	// the CIDR form net.InterfaceAddrs gives.
	ifaces := func() []string {
		return []string{"127.0.0.1/8", "192.0.2.7/24", "::1/128", "2001:db8::7/64", "fe80::1/64"}
	}
	for _, hosts := range [][]string{nil, {""}, {"0.0.0.0"}, {"::"}} {
		got := boundIPs(hosts, ifaces)
		want := []string{"192.0.2.7", "2001:db8::7", "fe80::1"}
		if len(got) != len(want) {
			t.Fatalf("hosts %q: glue %v, want %v", hosts, got, want)
		}
		for i, ip := range got {
			if !ip.Equal(net.ParseIP(want[i])) {
				t.Errorf("hosts %q: glue %v, want %v", hosts, got, want)
			}
		}
		if family(got[0]) != dns.TypeA {
			t.Errorf("IPv4 glue %v is not 4 bytes long: it would not pack as an A record", got[0])
		}
	}
}
