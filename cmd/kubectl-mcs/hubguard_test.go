package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// join and unjoin refuse a member context that reaches the hub's API
// server, here under another context's name, having only read which
// cluster each is: nothing is written on the hub.
func TestRefuseTheHubAsMember(t *testing.T) {
	var mu sync.Mutex
	var requests []string
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		requests = append(requests, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/kube-system" {
			fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","uid":"the-hubs"}}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(server.Close)
	kubeconfig := twoClusters(t, server, server) // member1 is the hub under another name
	for _, sub := range []string{"join", "unjoin"} {
		out, code := run(t, sub, "member1", "--kubeconfig", kubeconfig, "--context", "member1", "--hub-context", "hub")
		if code != 1 || !strings.Contains(out, `context "member1" reaches the hub's API server`) {
			t.Errorf("%s with the hub as the member: exit %d\n%s", sub, code, out)
		}
		mu.Lock()
		asked := requests
		requests = nil
		mu.Unlock()
		if want := []string{"GET /api/v1/namespaces/kube-system", "GET /api/v1/namespaces/kube-system"}; !slices.Equal(asked, want) {
			t.Errorf("%s with the hub as the member asked %v, want only %v", sub, asked, want)
		}
	}
}

// --hub-as-member lets a member context that reaches the hub through, and
// says so, so that join and unjoin keep the hub controller's own account;
// two clusters are two clusters with or without it.
func TestHubAsMember(t *testing.T) {
	hub, other := kubefake.NewClientset(kubeSystem("hub")), kubefake.NewClientset(kubeSystem("member1"))
	for _, tc := range []struct {
		name          string
		member        kubernetes.Interface
		allowed       bool
		isHub, refuse bool
	}{
		{"the hub, refused", hub, false, false, true},
		{"the hub, asked for", hub, true, true, false},
		{"another cluster", other, false, false, false},
		{"another cluster, with the flag", other, true, false, false},
	} {
		id, isHub, err := notTheHub(t.Context(), hub, tc.member, "ctx", tc.allowed)
		switch {
		case tc.refuse && (err == nil || !strings.Contains(err.Error(), "or give --hub-as-member")):
			t.Errorf("%s: %v, want refused naming --hub-as-member", tc.name, err)
		case !tc.refuse && (err != nil || isHub != tc.isHub || id != "kube-system-of-hub"):
			t.Errorf("%s: %q %v %v, want the hub's identity, isHub %v", tc.name, id, isHub, err, tc.isHub)
		}
	}
}
