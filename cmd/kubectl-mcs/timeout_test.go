package main

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// status honours --request-timeout: kubectl's flags reach the hub and every
// member, so a member that never answers is reported, once the timeout has
// run out, rather than hanging status; and the hub is asked as --as and
// --token say, as the members are.
func TestStatusRequestTimeout(t *testing.T) {
	hang := make(chan struct{})
	member := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-hang:
		}
	}))
	t.Cleanup(member.Close)
	t.Cleanup(func() { close(hang) })
	var asked sync.Map // the hub's requests' identities
	hub := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.Header.Get("Authorization")+" as "+r.Header.Get("Impersonate-User"), true)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(hub.Close)
	kubeconfig := twoClusters(t, hub, member)

	type result struct {
		out  string
		code int
	}
	done := make(chan result, 1)
	go func() {
		out, code := run(t, "status", "foo", "-n", "demo", "--kubeconfig", kubeconfig, "--hub-context", "hub", "--members", "member1", "--request-timeout", "1s", "--as", "alice", "--token", "flag-token", "-o", "json")
		done <- result{out, code}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second): // a guard, not a measure: the timeout is 1 s
		t.Fatal("status still waits for a member that never answers, 30 s into --request-timeout 1s")
	}
	var report Report
	if err := json.Unmarshal([]byte(r.out), &report); r.code != 0 || err != nil || len(report.Members) != 1 {
		t.Fatalf("status: exit %d, %v\n%s", r.code, err, r.out)
	}
	if e := report.Members[0].Error; !strings.Contains(e, "Timeout") && !strings.Contains(e, "deadline exceeded") {
		t.Errorf("member1's error %q, want its timeout", e)
	}
	n := 0
	asked.Range(func(who, _ any) bool {
		n++
		if who != "Bearer flag-token as alice" {
			t.Errorf("the hub was asked with %q, want --token's as --as", who)
		}
		return true
	})
	if n == 0 {
		t.Error("status never asked the hub")
	}
}

// twoClusters is a kubeconfig whose contexts hub and member1 reach those
// servers.
func twoClusters(t *testing.T, hub, member *httptest.Server) string {
	t.Helper()
	cluster := func(name string, s *httptest.Server) string {
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
		return fmt.Sprintf("- {name: %s, cluster: {server: %q, certificate-authority-data: %s}}\n", name, s.URL, base64.StdEncoding.EncodeToString(ca))
	}
	path := filepath.Join(t.TempDir(), "config")
	text := `apiVersion: v1
kind: Config
clusters:
` + cluster("hub", hub) + cluster("member1", member) + `users: [{name: u, user: {token: t}}]
contexts:
- {name: hub, context: {cluster: hub, user: u}}
- {name: member1, context: {cluster: member1, user: u}}
current-context: hub
`
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
