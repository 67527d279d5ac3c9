package mcs

import (
	"net"
	"testing"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func TestIndexFollowsDeletesAndMoves(t *testing.T) {
	x := newIndex("")
	x.self = self
	svc := toService(serviceObj("demo", "serve", []string{vipLocal}))
	imp := &serviceImport{objMeta: objMeta{namespace: "demo", name: "serve"}, strategy: api.LocalFirst}
	a := toSlice(localSlice("demo", "serve", "a", nil, ep{ip: "10.1.0.2"}, ep{ip: localIP}))
	b := toSlice(localSlice("demo", "serve", "b", nil, ep{ip: "10.1.0.3"}))
	x.setService(nil, svc)
	x.setImport(nil, imp)
	x.setSlice(nil, b)
	x.setSlice(nil, a)
	v := x.view("demo", "serve")
	if !v.native() || len(v.local) != 2 || v.local[0].name != "a" {
		t.Fatalf("view %+v", v)
	}
	moved := toSlice(localSlice("demo", "other", "a", nil, ep{ip: localIP}))
	x.setSlice(a, moved)
	if len(x.view("demo", "serve").local) != 1 || len(x.view("demo", "other").local) != 1 {
		t.Fatal("a slice whose service label changed must move")
	}
	x.setSlice(b, nil)
	x.setService(svc, nil)
	x.setImport(imp, nil)
	if x.view("demo", "serve") != nil {
		t.Fatal("a service without objects must leave the index")
	}
	x.setNamespace(nil, &namespace{objMeta{name: "demo"}})
	x.setNamespace(&namespace{objMeta{name: "demo"}}, nil)
	if x.hasNamespace("demo") {
		t.Fatal("deleted namespace still known")
	}
}

func TestBoundIPs(t *testing.T) {
	got := boundIPs([]string{"127.0.0.1", "10.0.0.10", "fd00::10", "::1"})
	if len(got) != 2 || family(got[0]) != dns.TypeA || !got[1].Equal(net.ParseIP("fd00::10")) {
		t.Fatalf("bound IPs %v", got)
	}
	for _, ip := range boundIPs(nil) { // every interface address, loopback left out
		if ip.IsLoopback() {
			t.Fatalf("loopback %v in the glue", ip)
		}
	}
}
