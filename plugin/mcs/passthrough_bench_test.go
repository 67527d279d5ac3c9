package mcs

import (
	"context"
	"runtime/debug"
	"testing"
	"unsafe"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/kubernetes/object"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	api "k8s.io/api/core/v1"
)

// BenchmarkPassThrough measures an ordinary name that mcs passes to the
// real kubernetes plugin, against the kubernetes plugin alone. Each query
// runs on a goroutine of its own, as the server runs it, so that the stack
// mcs leaves under the next plugin's is paid for as it is in a server:
// a fresh goroutine's stack grows by copying. stack-B/op is how deep the
// stack is where the kubernetes plugin starts, from where the server calls
// the first plugin: mcs's share of what every ordinary query needs.
func BenchmarkPassThrough(b *testing.B) {
	f := newFixture(b, baseConfig())
	addServices(f.m.idx, 10000)
	k := kubernetes.New([]string{testZone})
	k.APIConn = plainAPI{}
	f.m.Next = k
	r := new(dns.Msg)
	r.SetQuestion("plain.demo.svc.cluster.local.", dns.TypeA)
	for _, c := range []struct {
		name  string
		first plugin.Handler
	}{{"kubernetes alone", k}, {"mcs then kubernetes", f.m}} {
		b.Run(c.name, func(b *testing.B) {
			// Checked once: the answer is the kubernetes plugin's.
			w := &recorder{}
			serveFresh(c.first, r, w)
			if w.msg == nil || len(w.msg.Answer) != 1 || w.msg.Answer[0].(*dns.A).A.String() != testClusterIP {
				b.Fatalf("want the kubernetes plugin's A %s, got %v", testClusterIP, w.msg)
			}
			b.ReportAllocs()
			for b.Loop() {
				serveFresh(c.first, r, &test.ResponseWriter{})
			}
			b.ReportMetric(float64(stackDepth(c.first, k, r)), "stack-B/op")
		})
	}
}

// nextPluginRoom is how much stack the kubernetes plugin's path takes from
// the start of its ServeDNS (the wrapper that copies its receiver included)
// to the deepest point of answering a service name, rounded up.
const nextPluginRoom = 7 << 10

// TestStackReservedForNext: the next plugin finds a stack with room for
// the kubernetes plugin's path, so an ordinary name's goroutine grows no
// more under it. The control shows that the probe sees a growth.
func TestStackReservedForNext(t *testing.T) {
	// A collection shrinks a stack that uses little of itself: one between
	// mcs's reserve and the probe would take the room back, which has
	// nothing to do with mcs.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	f := newFixture(t, baseConfig())
	r := new(dns.Msg)
	r.SetQuestion("plain.demo.svc.cluster.local.", dns.TypeA)
	probe := &roomProbe{}
	serveFresh(probe, r, &test.ResponseWriter{})
	if !probe.grew {
		t.Fatalf("control: a fresh goroutine holds %d bytes more without growing: the runtime starts goroutines large here, the test cannot tell", nextPluginRoom)
	}
	f.m.Next = probe
	serveFresh(f.m, r, &test.ResponseWriter{})
	if probe.grew {
		t.Fatalf("the stack grew under the next plugin: mcs did not reserve %d bytes for it", nextPluginRoom)
	}
}

// roomProbe is a next plugin that takes nextPluginRoom bytes of stack and
// notes whether that moved its frame: a growth copies the stack.
type roomProbe struct{ grew bool }

func (p *roomProbe) ServeDNS(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	before := stackPointer()
	takeRoom()
	p.grew = stackPointer() != before
	return dns.RcodeSuccess, w.WriteMsg(new(dns.Msg).SetReply(r))
}

func (p *roomProbe) Name() string { return "probe" }

//go:noinline
func takeRoom() {
	var room [nextPluginRoom]byte
	keepRoom(&room)
}

//go:noinline
func keepRoom(*[nextPluginRoom]byte) {}

// TestAnswerSentFromServeDNS: mcs's own answers are sent from ServeDNS's
// frame, after the answer path has returned, so packing them (about 1.3 KB
// of stack more) does not start 1.5 KB deeper, past the doubling of a
// query's stack that it would then pay for on every answer.
func TestAnswerSentFromServeDNS(t *testing.T) {
	f := newFixture(t, baseConfig(), scenario{strategy: "RemoteAndLocal", setVIP: true, remote: readyRemote}.objects()...)
	r := new(dns.Msg)
	r.SetQuestion(serveName, dns.TypeA)
	depth := make(chan uintptr, 1)
	go onLargeStack(func() {
		w := &depthWriter{top: stackPointer(), depth: depth}
		_, _ = f.m.ServeDNS(context.Background(), w, r)
	})
	if d := <-depth; d > 512 {
		t.Fatalf("the answer is sent %d bytes below ServeDNS's caller, want at most 512", d)
	}
}

// depthWriter notes how deep below top its WriteMsg is called.
type depthWriter struct {
	test.ResponseWriter
	top   uintptr
	depth chan<- uintptr
}

func (w *depthWriter) WriteMsg(*dns.Msg) error {
	w.depth <- w.top - stackPointer()
	return nil
}

// serveFresh answers r with h on a new goroutine, as miekg/dns serves
// every UDP query.
func serveFresh(h plugin.Handler, r *dns.Msg, w dns.ResponseWriter) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = h.ServeDNS(context.Background(), w, r)
	}()
	<-done
}

// stackDepth is how many bytes of stack lie between the call of first and
// the start of next's ServeDNS. It runs on a stack grown beforehand (and
// kept large, so no garbage collection shrinks it), so that no copy moves
// it in between.
func stackDepth(first plugin.Handler, next *kubernetes.Kubernetes, r *dns.Msg) uintptr {
	depth := make(chan uintptr, 1)
	go onLargeStack(func() {
		top := stackPointer()
		probe := &depthProbe{next: next, top: top, depth: depth}
		if first == plugin.Handler(next) {
			_, _ = probe.ServeDNS(context.Background(), &test.ResponseWriter{}, r)
			return
		}
		m := *first.(*MCS)
		m.Next = probe
		_, _ = m.ServeDNS(context.Background(), &test.ResponseWriter{}, r)
	})
	return <-depth
}

// depthProbe notes the stack depth and hands the query on.
type depthProbe struct {
	next  plugin.Handler
	top   uintptr
	depth chan<- uintptr
}

func (p *depthProbe) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	p.depth <- p.top - stackPointer()
	return p.next.ServeDNS(ctx, w, r)
}

func (p *depthProbe) Name() string { return p.next.Name() }

//go:noinline
func stackPointer() uintptr {
	var x byte
	return uintptr(unsafe.Pointer(&x))
}

//go:noinline
func onLargeStack(fn func()) {
	var pad [64 << 10]byte
	keep(&pad)
	fn()
	keep(&pad)
}

// keep makes the compiler keep the array on the stack.
//
//go:noinline
func keep(p *[64 << 10]byte) { p[0]++ }

// recorder keeps the message written.
type recorder struct {
	test.ResponseWriter
	msg *dns.Msg
}

func (w *recorder) WriteMsg(m *dns.Msg) error { w.msg = m; return nil }

// plainAPI is the kubernetes plugin's API connection holding one Service,
// plain in namespace demo: what it reads to answer that name.
type plainAPI struct{ kubernetesAPI }

func (plainAPI) SvcIndex(key string) []*object.Service {
	if key != object.ServiceKey("plain", "demo") {
		return nil
	}
	return []*object.Service{{Name: "plain", Namespace: "demo", Index: key, ClusterIPs: []string{testClusterIP}, Type: api.ServiceTypeClusterIP,
		Ports: []api.ServicePort{{Name: "http", Protocol: api.ProtocolTCP, Port: 80}}}}
}

func (plainAPI) GetNamespaceByName(name string) (*object.Namespace, error) {
	return &object.Namespace{Name: name}, nil
}

func (plainAPI) HasSynced() bool { return true }

// kubernetesAPI is the method set of the kubernetes plugin's APIConn; the
// methods plainAPI does not define are never called for that name.
type kubernetesAPI interface {
	ServiceList() []*object.Service
	EndpointsList() []*object.Endpoints
	ServiceImportList() []*object.ServiceImport
	SvcIndex(string) []*object.Service
	SvcIndexReverse(string) []*object.Service
	SvcExtIndexReverse(string) []*object.Service
	SvcImportIndex(string) []*object.ServiceImport
	PodIndex(string) []*object.Pod
	EpIndex(string) []*object.Endpoints
	EpIndexReverse(string) []*object.Endpoints
	McEpIndex(string) []*object.MultiClusterEndpoints
	GetNodeByName(context.Context, string) (*api.Node, error)
	GetNamespaceByName(string) (*object.Namespace, error)
	Run()
	HasSynced() bool
	Stop() error
	Modified(kubernetes.ModifiedMode) int64
}
