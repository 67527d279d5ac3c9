package mcs

import (
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
)

// memoryWorld is a number of the DNS benchmark's imported services
// (test/bench/benchfixture): per service an annotated ServiceImport and one
// imported EndpointSlice per source cluster with ready endpoints of
// distinct addresses, and for the first fifth a ClusterIP Service.
type memoryWorld struct {
	services, clusters, endpoints int
}

// benchWorld is make bench's: 10,000 services × 3 clusters × 10 endpoints.
var benchWorld = memoryWorld{services: 10000, clusters: 3, endpoints: 10}

func (w memoryWorld) total() int { return w.services * w.clusters * w.endpoints }

// encoded holds the lists as the API server sends them: protobuf for the
// built-in kinds, which the plugin's client asks for (client.go), JSON for
// ServiceImports, a custom resource. Each list call decodes them afresh, so
// that every object owns its strings as it does when read off the wire.
type encoded struct {
	slices, services, imports []byte
}

const memoryNamespace = "mcs-bench"

func (w memoryWorld) encode(t testing.TB) encoded {
	t.Helper()
	var slices discoveryv1.EndpointSliceList
	var services corev1.ServiceList
	var imports mcsv1b1.ServiceImportList
	n := 0
	for i := range w.services {
		imports.Items = append(imports.Items, *stamped(benchfixture.Import(memoryNamespace, i), &n))
		if i < w.services/5 { // make bench's -native 2000 of 10000
			services.Items = append(services.Items, *stamped(serviceWithIP(i), &n))
		}
		for c := range w.clusters {
			slices.Items = append(slices.Items, *stamped(benchfixture.Slice(memoryNamespace, c, i, w.endpoints), &n))
		}
	}
	var e encoded
	var err1, err2, err3 error
	e.slices, err1 = slices.Marshal()
	e.services, err2 = services.Marshal()
	e.imports, err3 = json.Marshal(&imports)
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	return e
}

// stamped adds what the API server adds to every object it stores, the
// n-th: a UID, a resourceVersion and a creation time.
func stamped[T metav1.Object](obj T, n *int) T {
	*n++
	obj.SetUID(types.UID(fmt.Sprintf("0b8e5d1c-4a5f-4c1e-9d7a-%012d", *n)))
	obj.SetResourceVersion(strconv.Itoa(1000000 + *n))
	obj.SetCreationTimestamp(metav1.Unix(1795000000, 0))
	return obj
}

// serviceWithIP is service i's Service, with the ClusterIP the API server
// would allocate.
func serviceWithIP(i int) *corev1.Service {
	ip := benchfixture.IPv4(10<<24 | 96<<16 + i)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: memoryNamespace, Name: benchfixture.ServiceName(i)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
}

// serveLists makes f's fake API servers answer the lists of e, decoded on
// every call, keeping no object themselves.
func (f *fixture) serveLists(e encoded) {
	f.kube.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		l := &discoveryv1.EndpointSliceList{}
		return true, l, l.Unmarshal(e.slices)
	})
	f.kube.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		l := &corev1.ServiceList{}
		return true, l, l.Unmarshal(e.services)
	})
	f.mc.PrependReactor("list", "serviceimports", func(k8stesting.Action) (bool, runtime.Object, error) {
		l := &mcsv1b1.ServiceImportList{}
		return true, l, json.Unmarshal(e.imports, l)
	})
}

// BenchmarkIndexMemory reports the heap the plugin holds per ready endpoint
// (B/endpoint) once it has synced make bench's objects through its real
// informers, transform and index: what its resident memory scales with.
func BenchmarkIndexMemory(b *testing.B) {
	w := benchWorld
	e := w.encode(b)
	var held uint64
	for b.Loop() {
		held = heldAfterSync(b, w, e)
	}
	b.ReportMetric(float64(held)/float64(w.total()), "B/endpoint")
	b.ReportMetric(float64(held)/(1<<20), "MiB")
}

// heldAfterSync starts a plugin over e, as the bench's "mcs alone" (reverse
// zones too, so the PTR index is filled), and returns the heap it holds
// once synced.
func heldAfterSync(t testing.TB, w memoryWorld, e encoded) uint64 {
	t.Helper()
	cfg := baseConfig()
	cfg.zones = append(cfg.zones, "in-addr.arpa.", "ip6.arpa.")
	f := newUnstartedFixture(t, cfg)
	f.serveLists(e)
	f.m.watcher.startupTimeout = time.Minute
	before := heapAfterGC()
	if err := f.m.watcher.start(); err != nil || !f.m.Ready() {
		t.Fatalf("not ready after start: %v", err)
	}
	held := heapAfterGC() - before
	if n := len(f.m.idx.views); n != w.services {
		t.Fatalf("the index holds %d imported services, want %d", n, w.services)
	}
	goruntime.KeepAlive(f)
	_ = f.m.watcher.stop()
	return held
}

// heapAfterGC is the heap in use by live objects.
func heapAfterGC() uint64 {
	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// bytesPerEndpointBudget bounds the heap the plugin holds per endpoint
// (56 bytes now). The tightest place it runs is the member Corefile
// without its labels line, whose kubernetes plugin holds every imported
// slice too. For that CoreDNS to stay within 1.1× stock kubeadm CoreDNS's
// RSS on make bench's fleet (about 390 MiB), what mcs adds, its live heap
// twice over (the heap grows to twice its live part before a collection),
// must stay under 39 MiB: a live heap under 19.5 MiB, 68 bytes for each of
// the 300,000 endpoints.
const bytesPerEndpointBudget = 68

// The heap held per endpoint stays within budget: 2,000 services of make
// bench's shape measure as the 10,000 do, within a byte.
func TestIndexMemoryBudget(t *testing.T) {
	w := memoryWorld{services: 2000, clusters: 3, endpoints: 10}
	perEndpoint := float64(heldAfterSync(t, w, w.encode(t))) / float64(w.total())
	t.Logf("%.1f B/endpoint", perEndpoint)
	if perEndpoint > bytesPerEndpointBudget {
		t.Fatalf("the plugin holds %.1f B per endpoint, over the budget of %d", perEndpoint, bytesPerEndpointBudget)
	}
}
