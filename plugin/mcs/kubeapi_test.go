package mcs

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/kubernetes"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// kubeAPI is an API server of fixed objects for the real kubernetes plugin:
// it lists what the plugin's informers ask for, with their label selectors
// applied as the API server applies them, and keeps their watches open
// with nothing to say. So the plugin's options (labels, namespace_labels,
// noendpoints…) work through its own informers, not through a copy of
// their effect in a fake of its index.
type kubeAPI struct {
	svcs   []corev1.Service
	slices []discoveryv1.EndpointSlice
	nss    []corev1.Namespace
	broken map[string]bool // paths that answer 503, as an API server that cannot serve them
}

func (a *kubeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.broken[r.URL.Path] {
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	if r.URL.Query().Get("watch") == "true" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	list := metav1.ListMeta{ResourceVersion: "1"}
	var body any
	switch r.URL.Path {
	case "/api/v1/services":
		body = &corev1.ServiceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceList"}, ListMeta: list, Items: selected(a.svcs, sel)}
	case "/api/v1/namespaces":
		body = &corev1.NamespaceList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NamespaceList"}, ListMeta: list, Items: selected(a.nss, sel)}
	case "/api/v1/pods":
		body = &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, ListMeta: list}
	case "/apis/discovery.k8s.io/v1/endpointslices":
		body = &discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSliceList"}, ListMeta: list, Items: selected(a.slices, sel)}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

func selected[T any, P interface {
	*T
	GetLabels() map[string]string
}](objs []T, sel labels.Selector) []T {
	out := []T{}
	for i := range objs {
		if sel.Matches(labels.Set(P(&objs[i]).GetLabels())) {
			out = append(out, objs[i])
		}
	}
	return out
}

// serve starts a's server and returns a kubeconfig file for it.
func (a *kubeAPI) serve(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(a)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := "apiVersion: v1\nkind: Config\ncurrent-context: test\n" +
		"clusters: [{name: test, cluster: {server: " + srv.URL + "}}]\n" +
		"contexts: [{name: test, context: {cluster: test, user: test}}]\n" +
		"users: [{name: test, user: {}}]\n"
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubePlugin is the kubernetes plugin of stanza (its block's lines) for
// cluster.local, in-addr.arpa and the other zones, parsed by its own
// parser, reading a's objects through its own informers until the test
// ends. It waits as long as CoreDNS's start-up waits, at most until the
// plugin has synced.
func kubePlugin(t *testing.T, kubeconfig, stanza string, zones ...string) *kubernetes.Kubernetes {
	t.Helper()
	zones = append([]string{testZone, "in-addr.arpa."}, zones...)
	c := caddy.NewTestController("dns", "kubernetes "+strings.Join(zones, " ")+" {\nkubeconfig "+kubeconfig+"\n"+stanza+"\n}")
	c.Next()
	k, err := kubernetes.ParseStanza(c)
	if err != nil {
		t.Fatalf("kubernetes stanza %q: %v", stanza, err)
	}
	start, stop, err := k.InitKubeCache(context.Background())
	if err != nil {
		t.Fatalf("kubernetes stanza %q: %v", stanza, err)
	}
	t.Cleanup(func() { _ = stop() })
	if err := start(); err != nil {
		t.Fatalf("kubernetes stanza %q: %v", stanza, err)
	}
	return k
}
