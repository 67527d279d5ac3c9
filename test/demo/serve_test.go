package main

import (
	"net"
	"os"
	"strings"
	"testing"
)

// The pod servers answer as the seeds' serve image on pod addresses bound
// inside the demo's network namespace, and nowhere else, and follow the
// pods: a pod that is gone no longer answers.
func TestServersInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("making a network namespace needs root (CI runs as root)")
	}
	ns, err := newNetns()
	if err != nil {
		t.Fatal(err)
	}
	defer ns.close()
	ss := &servers{ns: ns, running: map[string]*server{}}
	defer ss.close()
	s := &story{http: ns.httpClient()}

	a := pod{cluster: member1, name: "serve-a", node: "kwok-node-0", ip: "10.10.0.5"}
	b := pod{cluster: member2, name: "serve-b", node: "kwok-node-0", ip: "10.12.0.9"}
	if err := ss.sync([]pod{a, b}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []pod{a, b} {
		body, err := s.get(t.Context(), "http://"+p.ip+":8080/")
		if err != nil {
			t.Fatal(err)
		}
		if want := "hello from cluster " + p.cluster + " (Node: kwok-node-0 Pod: " + p.name + " Address: " + p.ip + ")"; body != want {
			t.Errorf("GET %s: %q, want %q", p.ip, body, want)
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range addrs {
		if strings.HasPrefix(addr.String(), "10.10.0.5/") || strings.HasPrefix(addr.String(), "10.12.0.9/") {
			t.Errorf("pod address %s is bound outside the demo's namespace", addr)
		}
	}

	if err := ss.sync([]pod{b}); err != nil {
		t.Fatal(err)
	}
	if body, err := s.get(t.Context(), "http://"+a.ip+":8080/"); err == nil {
		t.Errorf("pod %s is gone but its address answered %q", a.name, body)
	}
	if _, err := s.get(t.Context(), "http://"+b.ip+":8080/"); err != nil {
		t.Errorf("pod %s: %v", b.name, err)
	}
}
