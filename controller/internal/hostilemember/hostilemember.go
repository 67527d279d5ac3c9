// Package hostilemember is the hostile member fixture of the controller's
// tests, imported from _test files only: a member's API server, over TLS,
// that a member Secret registers as `kubectl mcs join` registers one, and
// that answers as a small API server but for what a test scripts. Tests
// that the controller survives what a member answers build on it, and
// measure what its answers cost the controller's heap (PeakHeap,
// LiveHeap).
//
// As an API server it serves the objects a test gives it (Serve) in
// lists, watches and GETs, sends the watch events a test sends (Send),
// and takes every write: it answers it with the object written, with a
// UID, a resourceVersion and (a Service) a ClusterIP, records it (Writes)
// and keeps what a status update wrote (Status), but stores nothing else:
// the controller's caches of the member never see their own writes.
package hostilemember

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// Script answers r and returns true, or returns false to leave r to the
// fixture's own answer.
type Script func(w http.ResponseWriter, r *http.Request) bool

// Member is one member's API server.
type Member struct {
	Name   string
	srv    *httptest.Server
	script Script // nil: every answer as an API server's
	// listOnly refuses watches that stream their initial events
	// (RefuseWatchList).
	listOnly bool

	mu       sync.Mutex
	objects  map[string][]stored        // by resource, in the order served
	watchers map[string][]chan []byte   // open watches, by resource
	lists    map[string]int             // lists answered, by resource
	writes   []string                   // "verb resource[/sub] namespace/name"
	status   map[string]json.RawMessage // the last status written, by "resource namespace/name"
	rv       int64                      // the last resourceVersion given
}

// stored is an object served, as JSON.
type stored struct {
	namespace, name string
	json            []byte
}

// New serves member name's API server until the test ends.
func New(t testing.TB, name string, s Script) *Member {
	h := &Member{Name: name, script: s, objects: map[string][]stored{}, watchers: map[string][]chan []byte{}, lists: map[string]int{}, status: map[string]json.RawMessage{}, rv: 1000}
	h.srv = httptest.NewTLSServer(h)
	t.Cleanup(h.srv.Close)
	return h
}

// URL is the member's server.
func (h *Member) URL() string { return h.srv.URL }

// CA is the PEM of the certificate the member's server presents.
func (h *Member) CA() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: h.srv.Certificate().Raw})
}

// Kubeconfig is the member's kubeconfig as its Secret holds it: one
// context, named after the member, that trusts its server's certificate.
func (h *Member) Kubeconfig() string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: u
  user:
    token: t
contexts:
- name: %s
  context: {cluster: c, user: u}
current-context: %s
`, h.srv.URL, base64.StdEncoding.EncodeToString(h.CA()), h.Name, h.Name)
}

// Serve adds objs to what lists, watches' initial events and GETs of
// resource answer. Each is rendered as JSON now: what the test holds of
// them is held before the controller reads any.
func (h *Member) Serve(resource string, objs ...any) {
	tm, ok := KindOf[resource]
	if !ok {
		panic("hostilemember: no resource " + resource)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range objs {
		m, err := meta.Accessor(o)
		if err != nil {
			panic(err)
		}
		if m.GetResourceVersion() == "" {
			h.rv++
			m.SetResourceVersion(fmt.Sprint(h.rv))
		}
		h.objects[resource] = append(h.objects[resource], stored{m.GetNamespace(), m.GetName(), typed(o, tm)})
	}
}

// RefuseWatchList makes the member answer as an API server that does
// not stream lists (its WatchList feature off): a watch that asks for its
// initial events (sendInitialEvents) is refused as invalid, so client-go's
// informers list instead. Its lists answer whole, whatever limit they ask
// for, as an API server answers the informers' first list
// (resourceVersion 0) from its watch cache. Call it before the member is
// registered.
func (h *Member) RefuseWatchList() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listOnly = true
}

// Send sends an event of type typ (ADDED, MODIFIED, DELETED) of obj to
// every watch of resource open, and returns how many there are.
func (h *Member) Send(resource, typ string, obj any) int {
	m, err := meta.Accessor(obj)
	if err != nil {
		panic(err)
	}
	h.mu.Lock()
	h.rv++
	m.SetResourceVersion(fmt.Sprint(h.rv))
	event, _ := json.Marshal(map[string]any{"type": typ, "object": json.RawMessage(typed(obj, KindOf[resource]))})
	watchers := slices.Clone(h.watchers[resource])
	h.mu.Unlock()
	for _, w := range watchers {
		w <- append(event, '\n')
	}
	return len(watchers)
}

// Watching is how many watches of resource are open.
func (h *Member) Watching(resource string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.watchers[resource])
}

// Lists is how many lists of resource the member answered.
func (h *Member) Lists(resource string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lists[resource]
}

// Writes are the writes the member took, in order: "create
// serviceimports demo/foo", "update serviceexports/status demo/foo".
func (h *Member) Writes() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.writes)
}

// Status is the status the last update of resource's status subresource
// of namespace/name wrote, decoded into into; false when none was.
func (h *Member) Status(resource, namespace, name string, into any) bool {
	h.mu.Lock()
	raw, ok := h.status[resource+" "+namespace+"/"+name]
	h.mu.Unlock()
	if !ok {
		return false
	}
	if err := json.Unmarshal(raw, into); err != nil {
		panic(err)
	}
	return true
}

// typed is obj as JSON with its kind and apiVersion.
func typed(obj any, tm metav1.TypeMeta) []byte {
	data, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		panic(err)
	}
	fields["kind"], _ = json.Marshal(tm.Kind)
	fields["apiVersion"], _ = json.Marshal(tm.APIVersion)
	data, _ = json.Marshal(fields)
	return data
}

func (h *Member) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.script != nil && h.script(w, r) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		h.serveRead(w, r)
	default:
		h.serveWrite(w, r)
	}
}

// KindOf are the kinds of the resources the controller reads.
var KindOf = map[string]metav1.TypeMeta{
	"namespaces":     {Kind: "Namespace", APIVersion: "v1"},
	"services":       {Kind: "Service", APIVersion: "v1"},
	"endpointslices": {Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
	"serviceexports": {Kind: "ServiceExport", APIVersion: mcsv1b1.SchemeGroupVersion.String()},
	"serviceimports": {Kind: "ServiceImport", APIVersion: mcsv1b1.SchemeGroupVersion.String()},
}

// ResourceOf is the resource a request's path names: its last segment
// that is one.
func ResourceOf(r *http.Request) string {
	res, _, _, _ := parse(r)
	return res
}

// parse splits a request's path into its resource, namespace, name and
// subresource, as far as it names them.
func parse(r *http.Request) (resource, namespace, name, sub string) {
	path := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	for i := len(path) - 1; i >= 0; i-- {
		if _, ok := KindOf[path[i]]; !ok {
			continue
		}
		if i > 1 && path[i-2] == "namespaces" {
			namespace = path[i-1]
		}
		rest := path[i+1:]
		if len(rest) > 0 {
			name = rest[0]
		}
		if len(rest) > 1 {
			sub = rest[1]
		}
		return path[i], namespace, name, sub
	}
	return "", "", "", ""
}

// IsWatch reports whether r asks for a watch.
func IsWatch(r *http.Request) bool {
	w := r.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// serveRead answers a GET as the API server of a cluster that holds
// kube-system and what Serve gave, serving the MCS API's v1beta1: a
// watch sends the initial events asked for and the bookmark that ends
// them (watch-list), then what Send sends, until the client goes.
func (h *Member) serveRead(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	res, namespace, name, _ := parse(r)
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
	case res != "" && IsWatch(r) && r.URL.Query().Get("sendInitialEvents") == "true" && h.refusesWatchList():
		invalid(w, "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")
		return
	case res != "" && IsWatch(r):
		h.serveWatch(w, r, res, namespace)
		return
	case res != "" && name != "":
		if obj := h.find(res, namespace, name); obj != nil {
			_, _ = w.Write(obj)
			return
		}
		notFound(w)
		return
	case res != "":
		h.serveList(w, res, namespace)
		return
	default:
		notFound(w)
		return
	}
	_ = json.NewEncoder(w).Encode(answer)
}

func (h *Member) refusesWatchList() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.listOnly
}

// invalid answers as an API server answers options it does not take.
func invalid(w http.ResponseWriter, message string) {
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Message: message, Code: http.StatusUnprocessableEntity})
}

func notFound(w http.ResponseWriter) {
	w.WriteHeader(http.StatusNotFound)
	_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
}

// served are the objects of resource in namespace ("": all).
func (h *Member) served(resource, namespace string) []stored {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []stored
	for _, o := range h.objects[resource] {
		if namespace == "" || o.namespace == namespace {
			out = append(out, o)
		}
	}
	return out
}

func (h *Member) find(resource, namespace, name string) []byte {
	for _, o := range h.served(resource, namespace) {
		if o.name == name {
			return o.json
		}
	}
	return nil
}

// serveList writes the list item by item, as large as Serve made it.
func (h *Member) serveList(w http.ResponseWriter, resource, namespace string) {
	tm := KindOf[resource]
	h.mu.Lock()
	rv := h.rv
	h.lists[resource]++
	h.mu.Unlock()
	_, _ = fmt.Fprintf(w, `{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d"},"items":[`, tm.Kind+"List", tm.APIVersion, rv)
	for i, o := range h.served(resource, namespace) {
		if i > 0 {
			_, _ = w.Write([]byte(","))
		}
		_, _ = w.Write(o.json)
	}
	_, _ = w.Write([]byte("]}\n"))
}

func (h *Member) serveWatch(w http.ResponseWriter, r *http.Request, resource, namespace string) {
	tm := KindOf[resource]
	events := make(chan []byte)
	h.mu.Lock()
	h.watchers[resource] = append(h.watchers[resource], events)
	rv := h.rv
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.watchers[resource] = slices.DeleteFunc(h.watchers[resource], func(c chan []byte) bool { return c == events })
		h.mu.Unlock()
		// A Send under way is not left blocked.
		for {
			select {
			case <-events:
			default:
				return
			}
		}
	}()
	if r.URL.Query().Get("sendInitialEvents") == "true" {
		for _, o := range h.served(resource, namespace) {
			_, _ = fmt.Fprintf(w, `{"type":"ADDED","object":%s}`+"\n", o.json)
		}
	}
	_, _ = fmt.Fprintf(w, `{"type":"BOOKMARK","object":{"kind":%q,"apiVersion":%q,"metadata":{"resourceVersion":"%d","annotations":{%q:"true"}}}}`+"\n",
		tm.Kind, tm.APIVersion, rv, metav1.InitialEventsAnnotationKey)
	w.(http.Flusher).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-events:
			if _, err := w.Write(e); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}
}

// codecs decode what the controller writes: built-in types in protobuf,
// the MCS API in JSON.
var codecs = func() serializer.CodecFactory {
	s := k8sruntime.NewScheme()
	_ = kubescheme.AddToScheme(s)
	_ = mcsv1b1.Install(s)
	return serializer.NewCodecFactory(s)
}()

// serveWrite takes a write: it records it and answers with the object
// written, as stored.
func (h *Member) serveWrite(w http.ResponseWriter, r *http.Request) {
	res, namespace, name, sub := parse(r)
	body, _ := io.ReadAll(r.Body)
	var obj k8sruntime.Object
	if len(body) > 0 && r.Method != http.MethodPatch && r.Method != http.MethodDelete {
		var err error
		if obj, _, err = codecs.UniversalDeserializer().Decode(body, nil, nil); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, "%v", err)
			return
		}
	}
	verb := map[string]string{http.MethodPost: "create", http.MethodPut: "update", http.MethodPatch: "patch", http.MethodDelete: "delete"}[r.Method]
	if m, err := meta.Accessor(obj); err == nil && name == "" {
		name = m.GetName()
	}
	what := res
	if sub != "" {
		what += "/" + sub
	}
	h.mu.Lock()
	h.rv++
	rv := h.rv
	h.writes = append(h.writes, verb+" "+what+" "+namespace+"/"+name)
	h.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if obj == nil {
		if stored := h.find(res, namespace, name); stored != nil && r.Method == http.MethodPatch {
			_, _ = w.Write(stored)
			return
		}
		if r.Method == http.MethodPatch {
			notFound(w)
			return
		}
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess})
		return
	}
	m, _ := meta.Accessor(obj)
	if m.GetUID() == "" {
		m.SetUID(types.UID(fmt.Sprint("uid-", rv)))
	}
	m.SetResourceVersion(fmt.Sprint(rv))
	if s, ok := obj.(*corev1.Service); ok && s.Spec.ClusterIP == "" {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
	}
	data := typed(obj, KindOf[res])
	if sub == "status" {
		var fields struct {
			Status json.RawMessage `json:"status"`
		}
		_ = json.Unmarshal(data, &fields)
		h.mu.Lock()
		h.status[res+" "+namespace+"/"+name] = fields.Status
		h.mu.Unlock()
	}
	if r.Method == http.MethodPost {
		w.WriteHeader(http.StatusCreated)
	}
	_, _ = w.Write(data)
}

// LiveHeap is the heap that survives a collection.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// PeakHeap samples the heap's objects until stop is called, which
// returns the most they took, less what they took live before: what the
// test's answers cost at their worst, garbage not yet collected included.
// Until stop, the collector runs once garbage reaches a tenth of the live
// heap, not all of it (GOGC=100): otherwise the garbage a peak includes
// grows with whatever earlier tests of the process left live, and a bound
// would measure them.
func PeakHeap() (stop func() uint64) {
	before := LiveHeap()
	gcPercent := debug.SetGCPercent(10)
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
		debug.SetGCPercent(gcPercent)
		mu.Lock()
		defer mu.Unlock()
		if peak < before {
			return 0
		}
		return peak - before
	}
}

// WriteUntilGone writes chunk to w, n times or until the reader goes.
func WriteUntilGone(w interface{ Write([]byte) (int, error) }, chunk []byte, n int) error {
	for range n {
		if _, err := w.Write(chunk); err != nil {
			return err
		}
	}
	return nil
}

// Slowly answers r with a byte a second until the client goes.
func Slowly(w http.ResponseWriter, r *http.Request) {
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

// aloneEnv names, in the process Alone starts, the test it runs.
const aloneEnv = "HOSTILEMEMBER_ALONE"

// Alone runs the calling top-level test in a test process of its own and
// reports whether this is that process: the test then goes on. Elsewhere
// the test's result is the other process's (its output logged, its
// failure the test's), and the caller returns. A heap figure measured
// alongside the package's other tests measures them too: what their
// fixtures left running allocates, and the collector runs behind them
// (a peak of 10 MiB alone was 98 to 136 MiB under -count=10).
func Alone(t *testing.T) bool {
	t.Helper()
	if os.Getenv(aloneEnv) == t.Name() {
		return true
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), aloneEnv+"="+t.Name(), labtest.NoLab+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s alone, in a process of its own:\n%s", t.Name(), out)
	if err != nil {
		t.Errorf("%s alone: %v", t.Name(), err)
	}
	return false
}
