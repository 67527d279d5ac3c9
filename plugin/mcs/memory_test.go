package mcs

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
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
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// memoryWorld is the shape of the DNS benchmark's objects (test/bench,
// objects.go): per service an annotated ServiceImport and one imported
// EndpointSlice per source cluster, each with ready endpoints of distinct
// addresses; a fifth of the services with a ClusterIP Service.
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

func (w memoryWorld) encode(t testing.TB) encoded {
	t.Helper()
	var slices discoveryv1.EndpointSliceList
	var services corev1.ServiceList
	var imports mcsv1b1.ServiceImportList
	for i := range w.services {
		imports.Items = append(imports.Items, w.importObj(i))
		if i%5 == 0 {
			services.Items = append(services.Items, w.serviceObj(i))
		}
		for c := range w.clusters {
			slices.Items = append(slices.Items, w.sliceObj(c, i))
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

// apiMeta is what the API server adds to every object.
func apiMeta(name string, n int) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace:         "mcs-bench",
		Name:              name,
		UID:               types.UID("0b8e5d1c-4a5f-4c1e-9d7a-" + strconv.FormatInt(int64(100000000000+n), 10)),
		ResourceVersion:   strconv.Itoa(1000000 + n),
		CreationTimestamp: metav1.Unix(1795000000, 0),
	}
}

func (w memoryWorld) serviceName(i int) string { return "svc-" + strconv.Itoa(i) }

func (w memoryWorld) importObj(i int) mcsv1b1.ServiceImport {
	m := apiMeta(w.serviceName(i), i)
	m.Annotations = map[string]string{api.AnnotationStrategy: string(api.RemoteAndLocal)}
	return mcsv1b1.ServiceImport{ObjectMeta: m, Spec: mcsv1b1.ServiceImportSpec{
		Type:  mcsv1b1.ClusterSetIP,
		IPs:   []string{w.ip(10<<24|32<<16, i)},
		Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}}
}

func (w memoryWorld) serviceObj(i int) corev1.Service {
	ip := w.ip(10<<24|96<<16, i)
	return corev1.Service{ObjectMeta: apiMeta(w.serviceName(i), i), Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}}
}

func (w memoryWorld) sliceObj(c, i int) discoveryv1.EndpointSlice {
	cluster := "remote-" + strconv.Itoa(c+1)
	m := apiMeta(api.ImportedPrefix+cluster+"-"+w.serviceName(i), (c+1)*w.services+i)
	m.Labels = map[string]string{
		mcsv1b1.LabelServiceName:     w.serviceName(i),
		mcsv1b1.LabelSourceCluster:   cluster,
		discoveryv1.LabelServiceName: api.DerivedPrefix + w.serviceName(i),
		discoveryv1.LabelManagedBy:   api.ManagedBy,
	}
	m.Annotations = map[string]string{api.AnnotationSourceGeneration: "1"}
	s := discoveryv1.EndpointSlice{ObjectMeta: m, AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}}}
	for j := range w.endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{w.ip(10<<24|64<<16+c<<18, i*w.endpoints+j)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return s
}

func (w memoryWorld) ip(base, n int) string {
	ip := make(net.IP, net.IPv4len)
	binary.BigEndian.PutUint32(ip, uint32(base+n)) // #nosec G115 -- small test numbers
	return ip.String()
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
// (88 bytes now). make bench's target, a fifth of the kubernetes plugin's
// RSS (about 128 MiB), less the process's own 70 MiB (binary and runtime),
// leaves about 150 at 300,000 endpoints; the budget keeps room below that
// and fails on a change that undoes one of the savings.
const bytesPerEndpointBudget = 100

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
