package mcs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/kubernetes/object"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// derivedWorld is a consumption cluster's objects as the controller and
// the cluster's own controllers leave them: imports, their imported slices
// (this cluster's own exported ones among them) and derived Services, and
// local Services and slices.
func derivedWorld() (svcs []*corev1.Service, local, imported []*discoveryv1.EndpointSlice, imports []runtime.Object) {
	derived := func(name string, ips ...string) *corev1.Service {
		s := serviceObj("demo", api.DerivedPrefix+name, ips, httpPort)
		s.Labels = map[string]string{api.LabelManagedBy: api.ManagedBy}
		return s
	}
	svcs = []*corev1.Service{
		derived("web"), derived("serve", "10.96.7.7"), derived("bare"),
		serviceObj("demo", "web", nil, httpPort), serviceObj("demo", "serve", []string{"10.96.1.1"}, httpPort),
	}
	local = []*discoveryv1.EndpointSlice{
		localSlice("demo", "web", "web-local", []portSpec{httpPort}, ep{ip: "10.1.0.7", hostname: "web-1"}),
		localSlice("demo", "serve", "serve-local", []portSpec{httpPort}, ep{ip: "10.1.1.5"}),
	}
	// The imported slices keep their endpoints' topology zones, which the
	// kubernetes plugin's zonal names select by.
	imported = []*discoveryv1.EndpointSlice{
		importedSlice("demo", "web", "member2", "a", []portSpec{httpPort, dnsPort},
			ep{ip: "10.2.0.5", hostname: "web-0", zone: "zone-a"}, ep{ip: "10.2.0.6", zone: "zone-b"}, ep{ip: "10.2.0.8", notReady: true, zone: "zone-a"}),
		importedSlice("demo", "web", "member3", "b", []portSpec{httpPort}, ep{ip: "10.3.0.5", hostname: "web-0", zone: "zone-a"}),
		// web-2 is gone here, and not yet from the slice the controller copied back.
		importedSlice("demo", "web", self, "c", []portSpec{httpPort}, ep{ip: "10.1.0.7", hostname: "web-1", zone: "zone-b"}, ep{ip: "10.1.0.9", hostname: "web-2"}),
		importedSlice("demo", "serve", "member2", "d", []portSpec{httpPort}, ep{ip: "10.2.1.5", zone: "zone-a"}),
		importedSlice("demo", "serve", self, "e", []portSpec{httpPort}, ep{ip: "10.1.1.5"}),
		importedSlice("demo", "bare", "member2", "f", nil, ep{ip: "10.2.2.5", zone: "us.east"}),
		// The controller has not yet written derived-lost.
		importedSlice("demo", "lost", "member2", "g", []portSpec{httpPort}, ep{ip: "10.2.3.5"}),
	}
	imports = []runtime.Object{
		importObj("demo", "web", nil, []portSpec{httpPort, dnsPort}, headlessImport),
		importObj("demo", "serve", []string{"10.96.7.7"}, []portSpec{httpPort}),
		importObj("demo", "bare", nil, nil, headlessImport),
		importObj("demo", "lost", nil, []portSpec{httpPort}, headlessImport),
	}
	return svcs, local, imported, imports
}

// memberLabels is the member Corefile's labels line: the kubernetes plugin
// leaves the imported slices to mcs.
const memberLabels = "labels " + discoveryv1.LabelManagedBy + " notin (" + api.ManagedBy + ")"

// The names of derived-<svc> Services are answered alike whether the
// kubernetes plugin reads the imported slices or leaves them out (the
// member Corefile's labels line), and as the kubernetes plugin alone
// answers them from those slices; mcs answers them only in the second
// case. The kubernetes plugins are built by their own stanza parser, with
// the options that change what they answer, and read the world through
// their own informers.
func TestDerivedNamesAsKubernetes(t *testing.T) {
	svcs, local, imported, imports := derivedWorld()
	objs := slices.Clone(imports)
	for _, s := range append(slices.Clone(local), imported...) {
		objs = append(objs, s)
	}
	cfg := reverseConfig()
	cfg.ttl = 7 // not the kubernetes plugin's, so that the test sees whose TTL an answer has
	world := func(broken ...string) *kubeAPI {
		a := &kubeAPI{nss: []corev1.Namespace{*namespaceObj("demo")}, broken: map[string]bool{}}
		a.nss[0].Labels = map[string]string{"team": "a"}
		for _, s := range svcs {
			a.svcs = append(a.svcs, *s)
		}
		for _, s := range append(slices.Clone(local), imported...) {
			a.slices = append(a.slices, *s)
		}
		for _, p := range broken {
			a.broken[p] = true
		}
		return a
	}
	for _, c := range []struct {
		name, stanza string
		zones        []string // its forward zones besides cluster.local
		broken       []string // API paths the kubernetes plugin cannot list
		hidden       bool     // the kubernetes plugin answers no endpoint of the world
	}{
		{name: "defaults"},
		{name: "a second zone", zones: []string{"example.internal."}},
		{name: "ttl", stanza: "ttl 9"},
		{name: "namespaces that expose", stanza: "namespaces other demo"},
		{name: "namespaces that hide", stanza: "namespaces other", hidden: true},
		{name: "namespace_labels that expose", stanza: "namespace_labels team=a"},
		{name: "namespace_labels that hide", stanza: "namespace_labels team=b", hidden: true},
		{name: "noendpoints", stanza: "noendpoints", hidden: true},
		{name: "zonal", stanza: "zonal"},
		{name: "zonal in a second zone", stanza: "zonal", zones: []string{"example.internal."}},
		// Before its slices have synced it knows no name of theirs, and
		// answers SERVFAIL for what it cannot find yet.
		{name: "slices not synced", stanza: "startup_timeout 300ms", broken: []string{"/apis/discovery.k8s.io/v1/endpointslices"}, hidden: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			kubeconfig := world(c.broken...).serve(t)
			kubeAll := kubePlugin(t, kubeconfig, c.stanza, c.zones...)
			kubeSelected := kubePlugin(t, kubeconfig, c.stanza+"\n"+memberLabels, c.zones...)
			// mcs meets its kubernetes plugin as CoreDNS starts, before it
			// lists: what it keeps of a slice follows the plugin's options.
			f := newFixtureBeside(t, cfg, kubeSelected, objs...)
			answered := compareDerived(t, f, kubeAll, kubeSelected)
			if !c.hidden && answered < 25 {
				t.Errorf("only %d questions have an answer: the world is not what the test means", answered)
			}
		})
	}
	// Spot checks of what the comparison above holds equal.
	k := kubePlugin(t, world().serve(t), "zonal\n"+memberLabels)
	f := newFixtureBeside(t, cfg, k, objs...)
	f.check([]test.Case{
		{Qname: "derived-web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("derived-web.demo.svc.cluster.local. 5 IN A 10.1.0.7"),
			test.A("derived-web.demo.svc.cluster.local. 5 IN A 10.1.0.9"),
			test.A("derived-web.demo.svc.cluster.local. 5 IN A 10.2.0.5"),
			test.A("derived-web.demo.svc.cluster.local. 5 IN A 10.2.0.6"),
			test.A("derived-web.demo.svc.cluster.local. 5 IN A 10.3.0.5"),
		}},
		{Qname: "web-0.derived-web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("web-0.derived-web.demo.svc.cluster.local. 5 IN A 10.2.0.5"),
			test.A("web-0.derived-web.demo.svc.cluster.local. 5 IN A 10.3.0.5"),
		}},
		// The kubernetes plugin's zonal names: the endpoints in that zone;
		// prefer, every endpoint where none is; pin, NODATA.
		{Qname: "zone-a.pin._zone.derived-web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("zone-a.pin._zone.derived-web.demo.svc.cluster.local. 5 IN A 10.2.0.5"),
			test.A("zone-a.pin._zone.derived-web.demo.svc.cluster.local. 5 IN A 10.3.0.5"),
		}},
		{Qname: "us.east.pin._zone.derived-bare.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("us.east.pin._zone.derived-bare.demo.svc.cluster.local. 5 IN A 10.2.2.5"),
		}},
		{Qname: "zone-c.prefer._zone.derived-bare.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Answer: []dns.RR{
			test.A("zone-c.prefer._zone.derived-bare.demo.svc.cluster.local. 5 IN A 10.2.2.5"),
		}},
		{Qname: "zone-c.pin._zone.derived-web.demo.svc.cluster.local.", Qtype: dns.TypeA, Authoritative: true, Ns: []dns.RR{
			test.SOA("cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 0 7200 1800 86400 5"),
		}},
		// One PTR per address: the local pod's name, not its imported copy's.
		{Qname: ptrName(t, "10.1.0.7"), Qtype: dns.TypePTR, Authoritative: true, Answer: []dns.RR{
			test.PTR(ptrName(t, "10.1.0.7") + " 5 IN PTR web-1.web.demo.svc.cluster.local."),
		}},
		{Qname: ptrName(t, "10.1.0.9"), Qtype: dns.TypePTR, Authoritative: true, Answer: []dns.RR{
			test.PTR(ptrName(t, "10.1.0.9") + " 5 IN PTR web-2.derived-web.demo.svc.cluster.local."),
		}},
	})
}

// A Service of the user's named derived-<svc> is not the controller's:
// mcs does not stand in for the kubernetes plugin on its names, whatever
// imported slices there are of <svc>.
func TestDerivedNamesOnlyTheControllers(t *testing.T) {
	mine := serviceObj("demo", api.DerivedPrefix+"mine", nil, httpPort) // unlabelled: the user's
	slice := importedSlice("demo", "mine", "member2", "a", []portSpec{httpPort}, ep{ip: "10.2.4.5", hostname: "mine-0"})
	f := newFixture(t, baseConfig(), mine, importObj("demo", "mine", nil, []portSpec{httpPort}, headlessImport), slice)
	world := &kubeAPI{svcs: []corev1.Service{*mine}, slices: []discoveryv1.EndpointSlice{*slice}, nss: []corev1.Namespace{*namespaceObj("demo")}}
	k := kubePlugin(t, world.serve(t), memberLabels)
	f.m.Next, f.m.kube = k, kubePeerOf([]plugin.Handler{k})
	for _, name := range []string{"derived-mine.demo.svc.cluster.local.", "mine-0.derived-mine.demo.svc.cluster.local."} {
		if got, want := normalized(f.query(name, dns.TypeA)), normalized(serve(t, k, name, dns.TypeA)); got != want {
			t.Errorf("%s: mcs answers\n%s\nthe kubernetes plugin alone\n%s", name, got, want)
		}
	}
}

// compareDerived asks every name of derivedWorld of mcs in front of
// kubeAll, which reads the imported slices, and of mcs in front of
// kubeSelected, which does not, and of kubeAll alone, and reports where
// the answers differ. It returns how many questions have an answer.
func compareDerived(t *testing.T, f *fixture, kubeAll, kubeSelected *kubernetes.Kubernetes) (answered int) {
	t.Helper()
	behind := func(k *kubernetes.Kubernetes) {
		f.m.Next, f.m.kube = k, kubePeerOf([]plugin.Handler{k})
	}
	derivedAnswers := func() (n float64) {
		for _, zone := range []string{testZone, "in-addr.arpa."} {
			n += testutil.ToFloat64(requestsTotal.WithLabelValues("", zone, strategyNone, string(outcomeCombined)))
		}
		return n
	}
	forward := []string{
		"derived-web", "_http._tcp.derived-web", "_dns._udp.derived-web", "_https._tcp.derived-web",
		"web-0.derived-web", "10-2-0-6.derived-web", "web-1.derived-web", "10-2-0-8.derived-web", "nobody.derived-web",
		"derived-serve", "_http._tcp.derived-serve", "10-2-1-5.derived-serve", "10-1-1-5.derived-serve",
		"derived-bare", "10-2-2-5.derived-bare", "_http._tcp.derived-bare", "derived-gone",
		"derived-lost", "10-2-3-5.derived-lost", "_tcp.derived-web", "_udp.derived-bare",
		// The kubernetes plugin's zonal names, and names only shaped so.
		"zone-a.pin._zone.derived-web", "zone-a.prefer._zone.derived-web", "zone-b.pin._zone.derived-web",
		"zone-c.pin._zone.derived-web", "zone-c.prefer._zone.derived-web", "us.east.pin._zone.derived-bare",
		"zone-c.prefer._zone.derived-bare", "zone-a.pin._zone.derived-serve", "zone-a.prefer._zone.derived-lost",
		"zone-a.pin._zone.derived-gone", "zone-a.near._zone.derived-web", "pin._zone.derived-web",
	}
	// mcs answers one PTR per address: a local pod's name, not also its
	// imported copy's, and another cluster's endpoint's clusterset name,
	// whatever the kubernetes plugin reads. An address only this cluster's
	// imported slices hold has the kubernetes plugin's one name.
	reverse := []string{"10.1.0.9", "10.96.7.7", "10.9.9.9"}
	onePTR := []string{"10.1.0.7", "10.1.1.5", "10.2.0.5", "10.2.2.5", "10.2.3.5"}
	type question struct {
		name  string
		qtype uint16
	}
	var qs []question
	for _, zone := range kubeAll.Zones {
		if dnsutil.IsReverse(zone) > 0 {
			continue
		}
		for _, n := range forward {
			for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
				qs = append(qs, question{n + ".demo.svc." + zone, qtype})
			}
		}
	}
	for _, ip := range append(slices.Clone(reverse), onePTR...) {
		qs = append(qs, question{ptrName(t, ip), dns.TypePTR})
	}
	kubeNames := len(qs) - len(onePTR)
	for i, q := range qs {
		behind(kubeAll)
		before := derivedAnswers()
		withAll := serve(t, f.m, q.name, q.qtype)
		if n := derivedAnswers() - before; n != 0 && q.qtype != dns.TypePTR { // one PTR per address: mcs answers every imported one
			t.Errorf("%s %s: mcs answered a derived name the kubernetes plugin reads the slices of", q.name, dns.TypeToString[q.qtype])
		}
		behind(kubeSelected)
		withSelected := serve(t, f.m, q.name, q.qtype)
		what := q.name + " " + dns.TypeToString[q.qtype]
		if got, want := normalized(withSelected), normalized(withAll); got != want {
			t.Errorf("%s: with the imported slices left out of the kubernetes plugin\n%s\nwith them\n%s", what, got, want)
		}
		if i < kubeNames {
			if got, want := normalized(withSelected), normalized(serve(t, kubeAll, q.name, q.qtype)); got != want {
				t.Errorf("%s: mcs answers\n%s\nthe kubernetes plugin alone\n%s", what, got, want)
			}
		}
		if len(withSelected.Answer) > 0 {
			answered++
		}
	}
	return answered
}

// normalized is m's rcode, flags and records, each section sorted, the
// SOA serial left out: what a client compares.
func normalized(m *dns.Msg) string {
	section := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if soa, ok := rr.(*dns.SOA); ok {
				soa = dns.Copy(soa).(*dns.SOA)
				soa.Serial = 0
				rr = soa
			}
			out = append(out, rr.String())
		}
		slices.Sort(out)
		return strings.Join(out, "\n  ")
	}
	return dns.RcodeToString[m.Rcode] + " aa=" + map[bool]string{true: "1", false: "0"}[m.Authoritative] +
		"\nanswer:\n  " + section(m.Answer) + "\nauthority:\n  " + section(m.Ns) + "\nextra:\n  " + section(m.Extra)
}

// sliceAPI is the kubernetes plugin's API connection over Services and
// EndpointSlices, converted as its informers convert them.
type sliceAPI struct {
	kubernetesAPI
	svcs []*object.Service
	eps  []*object.Endpoints
}

func newSliceAPI(svcs []*corev1.Service, ss []*discoveryv1.EndpointSlice) sliceAPI {
	var a sliceAPI
	for _, s := range svcs {
		o, _ := object.ToService(s.DeepCopy())
		a.svcs = append(a.svcs, o.(*object.Service))
	}
	for _, s := range ss {
		o, _ := object.EndpointSliceToEndpoints(s.DeepCopy())
		a.eps = append(a.eps, o.(*object.Endpoints))
	}
	return a
}

func (a sliceAPI) SvcIndex(key string) []*object.Service {
	return filter(a.svcs, func(s *object.Service) bool { return s.Index == key })
}

func (a sliceAPI) SvcIndexReverse(ip string) []*object.Service {
	return filter(a.svcs, func(s *object.Service) bool { return slices.Contains(s.ClusterIPs, ip) })
}

func (a sliceAPI) SvcExtIndexReverse(string) []*object.Service { return nil }

func (a sliceAPI) EpIndex(key string) []*object.Endpoints {
	return filter(a.eps, func(e *object.Endpoints) bool { return e.Index == key })
}

func (a sliceAPI) EpIndexReverse(ip string) []*object.Endpoints {
	return filter(a.eps, func(e *object.Endpoints) bool { return slices.Contains(e.IndexIP, ip) })
}

func (a sliceAPI) GetNamespaceByName(name string) (*object.Namespace, error) {
	return &object.Namespace{Name: name}, nil
}

func (a sliceAPI) HasSynced() bool                        { return true }
func (a sliceAPI) Modified(kubernetes.ModifiedMode) int64 { return 0 }

func filter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// A dual-stack headless derived Service answers A with as many records as
// the message holds, as the kubernetes plugin does, whichever family its
// slices list first: the answer's budget goes to the asked family alone.
func TestDerivedDualStackFamilyFirst(t *testing.T) {
	var v6, v4 []ep
	for i := range 100 {
		v6 = append(v6, ep{ip: fmt.Sprintf("fd00::%x", i+1)})
		v4 = append(v4, ep{ip: fmt.Sprintf("10.2.5.%d", i+1)})
	}
	six := importedSlice("demo", "dual", "member2", "a", []portSpec{httpPort}, v6...) // listed first
	six.AddressType = discoveryv1.AddressTypeIPv6
	four := importedSlice("demo", "dual", "member2", "b", []portSpec{httpPort}, v4...)
	derived := serviceObj("demo", api.DerivedPrefix+"dual", nil, httpPort)
	derived.Labels = map[string]string{api.LabelManagedBy: api.ManagedBy}
	f := newFixture(t, baseConfig(), importObj("demo", "dual", nil, []portSpec{httpPort}, headlessImport), six, four)
	world := &kubeAPI{svcs: []corev1.Service{*derived}, slices: []discoveryv1.EndpointSlice{*six, *four}, nss: []corev1.Namespace{*namespaceObj("demo")}}
	kubeconfig := world.serve(t)
	kubeAll, kubeSelected := kubePlugin(t, kubeconfig, ""), kubePlugin(t, kubeconfig, memberLabels)
	f.m.Next, f.m.kube = kubeSelected, kubePeerOf([]plugin.Handler{kubeSelected})
	const name = "derived-dual.demo.svc.cluster.local."
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		// Over UDP without EDNS, as the server sends it: truncated to 512 bytes.
		got, want := queryOver(t, f.m, name, qtype, false), serve(t, kubeAll, name, qtype)
		got.Truncate(512)
		want.Truncate(512)
		if len(got.Answer) == 0 || len(got.Answer) != len(want.Answer) || got.Truncated != want.Truncated {
			t.Errorf("%s %s: mcs answers %d records (TC %t), the kubernetes plugin %d (TC %t)",
				name, dns.TypeToString[qtype], len(got.Answer), got.Truncated, len(want.Answer), want.Truncated)
		}
	}
}
