package mcs

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	dynfake "k8s.io/client-go/dynamic/fake"
	kfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The fake clientsets' watches do not send the initial events that the
// watch-list protocol waits for; the mcs-api informers cannot tell client-go
// so, hence the switch.
func TestMain(m *testing.M) {
	os.Setenv("KUBE_FEATURE_WatchListClient", "false")
	clog.Discard()
	os.Exit(m.Run())
}

// fixture is an MCS plugin fed by fake clientsets through the real informer
// path: objects go in through the fake API, answers come out of ServeDNS.
type fixture struct {
	t       testing.TB
	kube    *kfake.Clientset
	mc      *mcsfake.Clientset
	m       *MCS
	watches atomic.Int32
}

const (
	self          = "member1"
	nextMarker    = "answered-by-next"
	testZone      = "cluster.local."
	testClusterIP = "10.96.0.10"
)

func baseConfig() *config {
	return &config{
		zones:   []string{testZone, clustersetZone},
		cluster: self,
		answer:  answerVIP,
		ttl:     5,
		where:   "Corefile:1",
	}
}

// newFixture starts the plugin over objs and waits until it is ready and its
// watches are open, so later changes reach it.
func newFixture(t testing.TB, cfg *config, objs ...runtime.Object) *fixture {
	t.Helper()
	f := newUnstartedFixture(t, cfg, objs...)
	if err := f.m.watcher.start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = f.m.watcher.stop() })
	if !f.m.Ready() {
		t.Fatal("not ready after start")
	}
	f.waitFor(func() bool { return f.watches.Load() >= int32(len(watchedResources)) }, "watches to open")
	return f
}

// newFixtureBeside is newFixture in a server whose kubernetes plugin is
// k, as CoreDNS starts it: mcs meets k, then lists.
func newFixtureBeside(t testing.TB, cfg *config, k *kubernetes.Kubernetes, objs ...runtime.Object) *fixture {
	t.Helper()
	f := newUnstartedFixture(t, cfg, objs...)
	f.m.meet([]plugin.Handler{k})
	f.m.Next = k
	if err := f.m.watcher.start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = f.m.watcher.stop() })
	f.waitFor(func() bool { return f.watches.Load() >= int32(len(watchedResources)) }, "watches to open")
	return f
}

func newUnstartedFixture(t testing.TB, cfg *config, objs ...runtime.Object) *fixture {
	t.Helper()
	var kubeObjs, mcsObjs, dynObjs []runtime.Object
	for _, o := range objs {
		switch o.(type) {
		case *mcsv1b1.ServiceImport:
			mcsObjs = append(mcsObjs, o)
		case *unstructured.Unstructured:
			dynObjs = append(dynObjs, o)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	f := &fixture{t: t, kube: kfake.NewClientset(kubeObjs...), mc: mcsfake.NewSimpleClientset(mcsObjs...)}
	f.kube.Resources = []*metav1.APIResourceList{{
		GroupVersion: mcsv1b1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}},
	}}
	f.countWatches(&f.kube.Fake, f.kube.Tracker())
	f.countWatches(&f.mc.Fake, f.mc.Tracker())
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{clusterPropertyGVR: "ClusterPropertyList"}, dynObjs...)
	f.m = newMCS(cfg, clients{kube: f.kube, mcs: f.mc, dyn: dyn, host: "fake"})
	f.m.Next = test.HandlerFunc(answerFromNext)
	return f
}

// countWatches opens each watch itself so the count moves only once the
// watch exists: an object changed after that reaches the informer.
func (f *fixture) countWatches(fake *k8stesting.Fake, tracker k8stesting.ObjectTracker) {
	fake.PrependWatchReactor("*", func(action k8stesting.Action) (bool, watch.Interface, error) {
		opts := metav1.ListOptions{}
		if wa, ok := action.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := tracker.Watch(action.GetResource(), action.GetNamespace(), opts)
		if err == nil {
			f.watches.Add(1)
		}
		return true, w, err
	})
}

func (f *fixture) waitFor(cond func() bool, what string) {
	f.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answerFromNext stands in for the kubernetes plugin: its answer is marked
// so tests see that mcs passed the query on untouched.
func answerFromNext(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Answer = []dns.RR{txtRR(".", 1, nextMarker)}
	return dns.RcodeSuccess, w.WriteMsg(m)
}

func (f *fixture) query(name string, qtype uint16) *dns.Msg {
	f.t.Helper()
	return serve(f.t, f.m, name, qtype)
}

// serve asks h name and returns its answer.
func serve(t testing.TB, h plugin.Handler, name string, qtype uint16) *dns.Msg {
	t.Helper()
	r := new(dns.Msg)
	r.SetQuestion(dns.Fqdn(name), qtype)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := h.ServeDNS(context.Background(), rec, r); err != nil {
		t.Fatalf("%s %s: %v", name, dns.TypeToString[qtype], err)
	}
	if rec.Msg == nil {
		t.Fatalf("%s %s: no answer written", name, dns.TypeToString[qtype])
	}
	return rec.Msg
}

func passedOn(m *dns.Msg) bool {
	if len(m.Answer) != 1 {
		return false
	}
	txt, ok := m.Answer[0].(*dns.TXT)
	return ok && len(txt.Txt) == 1 && txt.Txt[0] == nextMarker
}

// check runs test cases against the fixture, comparing every section.
func (f *fixture) check(cases []test.Case) {
	f.t.Helper()
	for _, tc := range cases {
		resp := f.query(tc.Qname, tc.Qtype)
		if err := test.SortAndCheck(resp, tc); err != nil {
			f.t.Errorf("%s %s: %v\n%s", tc.Qname, dns.TypeToString[tc.Qtype], err, resp)
		}
	}
}

var (
	metav1UpdateOptions = metav1.UpdateOptions{}
	metav1DeleteOptions = metav1.DeleteOptions{}
)

// Object builders. Keys come from mcs-api, k8s.io/api and package api.

type portSpec struct {
	name     string
	protocol corev1.Protocol
	port     int32
}

var (
	httpPort = portSpec{"http", corev1.ProtocolTCP, 80}
	dnsPort  = portSpec{"dns", corev1.ProtocolUDP, 53}
)

func namespaceObj(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func serviceObj(ns, name string, ips []string, ports ...portSpec) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if len(ips) == 0 {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	} else {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ips[0], ips
	}
	for _, p := range ports {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: p.name, Protocol: p.protocol, Port: p.port})
	}
	return s
}

type importOpt func(*mcsv1b1.ServiceImport)

func withStrategy(s string) importOpt {
	return func(si *mcsv1b1.ServiceImport) {
		si.Annotations = map[string]string{api.AnnotationStrategy: s}
	}
}

func headlessImport(si *mcsv1b1.ServiceImport) { si.Spec.Type = mcsv1b1.Headless }

// withMinReady sets LocalFirst's minimum; after withStrategy.
func withMinReady(n string) importOpt {
	return func(si *mcsv1b1.ServiceImport) { si.Annotations[api.AnnotationMinReadyEndpoints] = n }
}

func importObj(ns, name string, ips []string, ports []portSpec, opts ...importOpt) *mcsv1b1.ServiceImport {
	si := &mcsv1b1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	si.Spec.Type, si.Spec.IPs = mcsv1b1.ClusterSetIP, ips
	for _, p := range ports {
		si.Spec.Ports = append(si.Spec.Ports, mcsv1b1.ServicePort{Name: p.name, Protocol: p.protocol, Port: p.port})
	}
	for _, o := range opts {
		o(si)
	}
	return si
}

type ep struct {
	ip, hostname string
	notReady     bool
	zone         string // its topology zone; "" none
}

func sliceObj(ns, name string, labels map[string]string, ports []portSpec, eps ...ep) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &p.name, Protocol: &p.protocol, Port: &p.port})
	}
	for _, e := range eps {
		ready := !e.notReady
		d := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.hostname != "" {
			d.Hostname = &e.hostname
		}
		if e.zone != "" {
			d.Zone = &e.zone
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

// localSlice is a slice of this cluster's own Service.
func localSlice(ns, svc, name string, ports []portSpec, eps ...ep) *discoveryv1.EndpointSlice {
	return sliceObj(ns, name, map[string]string{discoveryv1.LabelServiceName: svc}, ports, eps...)
}

// importedSlice is written by mcs-controller: labelled with the source
// cluster, with kubernetes.io/service-name=derived-<svc>, and as the
// controller's (endpointslice.kubernetes.io/managed-by).
func importedSlice(ns, svc, cluster, name string, ports []portSpec, eps ...ep) *discoveryv1.EndpointSlice {
	return sliceObj(ns, api.ImportedPrefix+cluster+"-"+name, map[string]string{
		mcsv1b1.LabelServiceName:     svc,
		mcsv1b1.LabelSourceCluster:   cluster,
		discoveryv1.LabelServiceName: api.DerivedPrefix + svc,
		discoveryv1.LabelManagedBy:   api.ManagedBy,
	}, ports, eps...)
}

func clusterProperty(value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"value": value}}}
	u.SetAPIVersion("about.k8s.io/v1alpha1")
	u.SetKind("ClusterProperty")
	u.SetName(clusterPropertyName)
	return u
}

func leaseObj(cluster string, renewed time.Time, seconds int32) *coordv1.Lease {
	t := metav1.NewMicroTime(renewed)
	return &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: api.LeaseNamespace, Name: api.LeasePrefix + cluster},
		Spec:       coordv1.LeaseSpec{RenewTime: &t, LeaseDurationSeconds: &seconds},
	}
}
