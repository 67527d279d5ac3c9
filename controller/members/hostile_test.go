package members

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// The hostile member fixture: a member's API server, over TLS, registered
// through a member Secret as `kubectl mcs join` registers one, that answers
// as a small API server (an empty cluster serving the MCS API) but for
// what a test scripts. Tests that the controller survives what a member
// answers build on it: runHostile registers the members, peakHeap
// measures what their answers cost the controller.

// script answers r and returns true, or returns false to leave r to the
// fixture's own answer.
type script func(w http.ResponseWriter, r *http.Request) bool

// hostileMember is one member's API server.
type hostileMember struct {
	name   string
	srv    *httptest.Server
	script script // nil: every answer as an API server's
}

// newHostileMember serves member name's API server until the test ends.
func newHostileMember(t *testing.T, name string, s script) *hostileMember {
	h := &hostileMember{name: name, script: s}
	h.srv = httptest.NewTLSServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

// kubeconfig is the member's kubeconfig as its Secret holds it.
func (h *hostileMember) kubeconfig() string {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
	return kubeconfig(h.srv.URL, "certificate-authority-data: "+base64.StdEncoding.EncodeToString(ca), "token: t")
}

func (h *hostileMember) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.script != nil && h.script(w, r) {
		return
	}
	serveEmptyCluster(w, r)
}

// kindOf are the kinds of the resources the controller reads.
var kindOf = map[string]metav1.TypeMeta{
	"namespaces":     {Kind: "Namespace", APIVersion: "v1"},
	"services":       {Kind: "Service", APIVersion: "v1"},
	"endpointslices": {Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
	"serviceexports": {Kind: "ServiceExport", APIVersion: mcsv1b1.SchemeGroupVersion.String()},
	"serviceimports": {Kind: "ServiceImport", APIVersion: mcsv1b1.SchemeGroupVersion.String()},
}

// resourceOf is the resource a request's path names: its last segment
// that is one.
func resourceOf(r *http.Request) string {
	path := strings.Split(r.URL.Path, "/")
	for i := len(path) - 1; i >= 0; i-- {
		if _, ok := kindOf[path[i]]; ok {
			return path[i]
		}
	}
	return ""
}

// serveEmptyCluster answers r as the API server of a cluster with no
// objects but kube-system, serving the MCS API's v1beta1: a watch sends
// the end of its initial events (watch-list) and waits.
func serveEmptyCluster(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	res := resourceOf(r)
	var answer any
	switch {
	case r.URL.Path == "/readyz":
		_, _ = w.Write([]byte("ok"))
		return
	case r.URL.Path == "/apis/"+mcsv1b1.SchemeGroupVersion.String():
		answer = metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: mcsv1b1.SchemeGroupVersion.String(),
			APIResources: []metav1.APIResource{{Name: mcsapi.ServiceExports, Namespaced: true, Kind: "ServiceExport"}, {Name: mcsapi.ServiceImports, Namespaced: true, Kind: "ServiceImport"}}}
	case r.URL.Path == "/api/v1/namespaces/kube-system":
		answer = map[string]any{"kind": "Namespace", "apiVersion": "v1", "metadata": map[string]any{"name": "kube-system", "uid": "uid-kube-system", "resourceVersion": "1"}}
	case res != "" && isWatch(r):
		tm := kindOf[res]
		_, _ = fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"1","annotations":{%q:"true"}}}}`+"\n",
			tm.Kind, tm.APIVersion, metav1.InitialEventsAnnotationKey)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		return
	case res != "":
		tm := kindOf[res]
		answer = map[string]any{"kind": tm.Kind + "List", "apiVersion": tm.APIVersion, "metadata": map[string]any{"resourceVersion": "1"}, "items": []any{}}
	default:
		w.WriteHeader(http.StatusNotFound)
		answer = metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound}
	}
	_ = json.NewEncoder(w).Encode(answer)
}

// hostileMaxObjects is what the fixture's members may have held
// (--member-max-objects): a hundredth of the default, so that a member that
// passes it does within seconds under the race detector too.
const hostileMaxObjects = 1000

// hostileMaxBytes is what they may have held, as decoded
// (--member-max-mib): 4 MiB, for the same reason.
const hostileMaxBytes = 4 << 20

// runHostile runs a registry of the members, each registered by its
// Secret, with the bounds mcs-controller runs with by default but
// hostileMaxObjects and hostileMaxBytes, probed every 50 ms; it returns once each is
// registered.
func runHostile(t *testing.T, members ...*hostileMember) *Registry {
	t.Helper()
	hub := k8sfake.NewClientset()
	for _, h := range members {
		if _, err := hub.CoreV1().Secrets("mcs-system").Create(t.Context(), memberSecret(h.name, h.name, 100, h.kubeconfig()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	none := func(string, any) {}
	r := runRegistry(t, Options{
		Hub: hub, Namespace: "mcs-system", QPS: 100, Burst: 100, ProbeEvery: 50 * time.Millisecond,
		Recorder: record.NewFakeRecorder(100), MaxObjects: hostileMaxObjects, MaxBytes: hostileMaxBytes, MaxExports: 20000,
	}, Handlers{Services: none, Slices: none, Exports: none, Imports: none})
	for _, h := range members {
		registeredBy(t, r, h.name, "secret mcs-system/"+h.name)
	}
	return r
}

// refusedWith waits until cluster is unreachable with an error saying
// each of want: within 30 s, as a probe that times out takes 5 s, and
// the race detector slows every decoding.
func refusedWith(t *testing.T, r *Registry, cluster string, want ...string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m := r.get(cluster)
		ok, err := m.Reachable()
		last = fmt.Errorf("%s reachable %v, error %v; want it unreachable, saying %q", cluster, ok, err, want)
		return !ok && err != nil && containsAll(err.Error(), want), nil
	})
	if err != nil {
		t.Fatal(last)
	}
}

// healthyNow waits until cluster is healthy: reachable, its informers synced.
func healthyNow(t *testing.T, r *Registry, cluster string) {
	t.Helper()
	eventually(t, func() error {
		if m := r.get(cluster); !m.Healthy() {
			return fmt.Errorf("%s not healthy: %v", cluster, m.Err())
		}
		return nil
	})
}

// peakHeap samples the heap's objects until stop is called, which
// returns the most they took, less what they took live before: what the
// test's answers cost at their worst, garbage not yet collected included.
func peakHeap() (stop func() uint64) {
	before := liveHeap()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var mu sync.Mutex
	var peak uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			metrics.Read(sample)
			mu.Lock()
			peak = max(peak, sample[0].Value.Uint64())
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-stopped
		mu.Lock()
		defer mu.Unlock()
		if peak < before {
			return 0
		}
		return peak - before
	}
}

// writeUntilGone writes chunk to w, n times or until the reader goes.
func writeUntilGone(w interface{ Write([]byte) (int, error) }, chunk []byte, n int) error {
	for range n {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// slowly answers r with a byte a second until the client goes.
func slowly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for {
		_, _ = w.Write([]byte(" "))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			return
		case <-time.After(time.Second):
		}
	}
}
