package members

import (
	"bytes"
	"fmt"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsapifake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
	mcsapischeme "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/scheme"

	mcsscheme "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned/scheme"
	"github.com/coredns-mcs/coredns-mcs/controller/internal/hostilemember"
)

// What the controller holds of a fleet, per cached object: the scale
// fixture of make bench (test/bench/propagation -headless -consumers
// member2 -join member3). Per service: member1's Service and EndpointSlice;
// in member1 (the provider imports too, RemoteAndLocal), member2 and
// member3, the ServiceImport, derived-<svc> and the imported slice; on the
// hub, the MultiClusterService. samples/ holds one of
// each as the lab's API servers returned them (managedFields, uid,
// resourceVersion, status and all); every service's copy is rendered from
// it, sent as an API server sends it (protobuf for built-in types, JSON for
// custom resources), decoded by the clients' codecs, passed through the
// informers' transform and added to the informers' stores, indexes
// included.

// fleetObject is one object of every service, and the clusters that hold
// a copy of it. The members' informers list at once: a copy arrives in
// one member about when it does in the other.
type fleetObject struct {
	file     string
	clusters []string
}

var fleetObjects = []fleetObject{
	{"source-service.json", []string{"member1"}},
	{"source-slice.json", []string{"member1"}},
	{"service-import.json", []string{"member1", "member2", "member3"}},
	{"derived-service.json", []string{"member1", "member2", "member3"}},
	{"imported-slice.json", []string{"member1", "member2", "member3"}},
	{"multiclusterservice.json", []string{"hub"}},
}

// fleet is the stores of the hub and the three members.
type fleet struct {
	members map[string]*caches
	hub     cache.Indexer
}

func newFleet() *fleet {
	f := &fleet{members: map[string]*caches{}}
	for _, name := range []string{"member1", "member2", "member3"} {
		f.members[name] = makeCaches(k8sfake.NewClientset(), mcsapifake.NewSimpleClientset(), mcsv1b1.SchemeGroupVersion, mcsv1b1.SchemeGroupVersion, nil, "")
	}
	// The store of hub.go's informers: without indexes.
	f.hub = cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, NoIndex)
	return f
}

// add stores obj in cluster's informer of its kind, as the informer does:
// transformed first.
func (f *fleet) add(cluster string, obj any) error {
	if cluster == "hub" {
		obj, err := TrimHub(obj)
		if err != nil {
			return err
		}
		return f.hub.Add(obj)
	}
	c := f.members[cluster]
	var s Scoped
	switch obj.(type) {
	case *corev1.Service:
		s = c.services
	case *discoveryv1.EndpointSlice:
		s = c.slices
	case *mcsv1b1.ServiceImport:
		s = c.imports
	case *mcsv1b1.ServiceExport:
		s = c.exports
	default:
		return fmt.Errorf("no store for %T", obj)
	}
	obj, err := trim(obj)
	if err != nil {
		return err
	}
	return s.Of("").GetIndexer().Add(obj)
}

// wire renders the copy of a samples/ object for service svc-<i>,
// encoded as an API server sends it.
type wire struct {
	templates map[string]template
	proto     *protobuf.Serializer
}

// template is a sample and what differs in every service's copy of it:
// its names, UIDs (the same UID in the objects that refer to one another),
// addresses and resourceVersions.
type template struct {
	text                 string
	uids, addresses, rvs []string
}

var (
	sampleUID     = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	sampleAddress = regexp.MustCompile(`10\.\d+\.0\.10`)
	sampleVersion = regexp.MustCompile(`"resourceVersion": "\d+"`)
)

func newWire(t testing.TB) *wire {
	w := &wire{templates: map[string]template{}, proto: protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)}
	for _, o := range fleetObjects {
		data, err := samples.ReadFile("samples/" + o.file)
		if err != nil {
			t.Fatal(err)
		}
		s := string(data)
		w.templates[o.file] = template{s, sampleUID.FindAllString(s, -1), sampleAddress.FindAllString(s, -1), sampleVersion.FindAllString(s, -1)}
	}
	return w
}

// render is the sample's JSON for service i.
func (w *wire) render(file string, i int) []byte {
	t := w.templates[file]
	pairs := []string{"svc-10", "svc-" + strconv.Itoa(i)}
	for _, uid := range t.uids {
		pairs = append(pairs, uid, fmt.Sprintf("%s%012x", uid[:24], i))
	}
	for _, a := range t.addresses {
		pairs = append(pairs, a, fmt.Sprintf("%s.%d.%d", a[:strings.LastIndex(a[:len(a)-3], ".")], i>>8&255, i&255))
	}
	for _, rv := range t.rvs {
		n, _ := strconv.Atoi(strings.Trim(rv[len(`"resourceVersion": `):], `"`))
		pairs = append(pairs, rv, fmt.Sprintf(`"resourceVersion": "%d"`, n+i))
	}
	return []byte(strings.NewReplacer(pairs...).Replace(t.text))
}

// decoded is object file of service i as the member's client decodes it:
// built-in types from protobuf, custom resources from JSON, by decoders
// that clear the kind as the clients' do.
func (w *wire) decoded(file string, i int) (any, error) {
	data := w.render(file, i)
	obj, _, err := kubescheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err == nil { // a built-in type: sent as protobuf
		var buf bytes.Buffer
		if err := w.proto.Encode(obj, &buf); err != nil {
			return nil, err
		}
		obj, _, err = k8sruntime.WithoutVersionDecoder{Decoder: kubescheme.Codecs.UniversalDeserializer()}.Decode(buf.Bytes(), nil, nil)
		return obj, err
	}
	for _, d := range []k8sruntime.Decoder{mcsapischeme.Codecs.UniversalDeserializer(), mcsscheme.Codecs.UniversalDeserializer()} {
		if obj, _, err = (k8sruntime.WithoutVersionDecoder{Decoder: d}).Decode(data, nil, nil); err == nil {
			return obj, nil
		}
	}
	return nil, err
}

// fleetBytes builds the stores of a fleet of n services and returns the
// live heap they take per object, overall and by samples/ file.
func fleetBytes(t testing.TB, n int) (perObject float64, byFile map[string]float64) {
	dictionaries.Clear() // as in a fresh process: the fleet's first objects become them
	w := newWire(t)
	f := newFleet()
	byFile = map[string]float64{}
	before := hostilemember.LiveHeap()
	last, objects := before, 0
	for _, o := range fleetObjects {
		for i := range n {
			for _, cluster := range o.clusters {
				obj, err := w.decoded(o.file, i)
				if err != nil {
					t.Fatalf("%s of svc-%d: %v", o.file, i, err)
				}
				if err := f.add(cluster, obj); err != nil {
					t.Fatal(err)
				}
			}
		}
		now := hostilemember.LiveHeap()
		byFile[o.file] = (float64(now) - float64(last)) / float64(n*len(o.clusters))
		objects += n * len(o.clusters)
		last = now
	}
	runtime.KeepAlive(f)
	return (float64(last) - float64(before)) / float64(objects), byFile
}

// TestFleetBytesPerObject bounds the bytes a cached object of the scale
// fixture takes: deploy/'s memory limit rests on it. It was 382 B (at
// 10,000 services) when the limit was set.
func TestFleetBytesPerObject(t *testing.T) {
	const bound = 450
	perObject, byFile := fleetBytes(t, 1000)
	t.Logf("%.0f B per cached object", perObject)
	if perObject > bound {
		t.Errorf("%.0f B per cached object, want at most %d; by object: %v", perObject, bound, byFile)
	}
}

// BenchmarkFleetCaches reports the live heap per cached object of the
// scale fixture at 10,000 services (90,000 objects), overall and by kind:
//
//	go test -run '^$' -bench FleetCaches -benchtime 1x ./controller/members/
func BenchmarkFleetCaches(b *testing.B) {
	var perObject float64
	var byFile map[string]float64
	for b.Loop() {
		perObject, byFile = fleetBytes(b, 10000)
	}
	b.ReportMetric(perObject, "B/object")
	for file, bytes := range byFile {
		b.ReportMetric(bytes, "B/"+file[:len(file)-len(".json")])
	}
}
