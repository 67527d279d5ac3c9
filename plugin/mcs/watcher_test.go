package mcs

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin/ready"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func TestClusterFromClusterProperty(t *testing.T) {
	cfg := baseConfig()
	cfg.cluster = ""
	f := newFixture(t, cfg, clusterProperty("member1"),
		importObj("demo", "serve", nil, nil, withStrategy("RemoteAndLocal")),
		importedSlice("demo", "serve", "member1", "a", nil, ep{ip: "10.1.0.99"}),
		importedSlice("demo", "serve", "member2", "b", nil, readyRemote...))
	for _, r := range watchedResources {
		if got := testutil.ToFloat64(informersSynced.WithLabelValues(r)); got != 1 {
			t.Errorf("informers_synced{resource=%q} = %v", r, got)
		}
	}
	if f.m.idx.self != "member1" {
		t.Fatalf("cluster %q, want member1", f.m.idx.self)
	}
	if got := addresses(f.query(serveName, dns.TypeA)); !equal(got, remoteIP) {
		t.Fatalf("member1's own imported slice must not be remote: %v", got)
	}
}

func TestClusterNameErrors(t *testing.T) {
	tests := []struct {
		name  string
		props []runtime.Object
		want  string
	}{
		{"no ClusterProperty", nil, "option cluster is not set and ClusterProperty cluster.clusterset.k8s.io does not exist"},
		{"not a cluster name", []runtime.Object{clusterProperty("Not A Name")}, `has spec.value "Not A Name", not a cluster name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.cluster = ""
			f := newUnstartedFixture(t, cfg, tc.props...)
			err := f.m.watcher.start()
			defer f.m.watcher.stop()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "Corefile:1") {
				t.Fatalf("want an error naming the option and line, got %v", err)
			}
		})
	}
}

// Where only v1alpha1 ServiceImports are served, those are read.
func TestServiceImportV1alpha1(t *testing.T) {
	f := newUnstartedFixture(t, baseConfig())
	f.kube.Resources = []*metav1.APIResourceList{{
		GroupVersion: mcsv1a1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}},
	}}
	si := &mcsv1a1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "serve"}}
	si.Spec.Type, si.Spec.IPs = mcsv1a1.ClusterSetIP, []string{vipSet}
	if err := f.mc.Tracker().Add(si); err != nil {
		t.Fatal(err)
	}
	if err := f.m.watcher.start(); err != nil {
		t.Fatal(err)
	}
	defer f.m.watcher.stop()
	if got := addresses(f.query("serve.demo.svc.clusterset.local.", dns.TypeA)); !equal(got, vipSet) {
		t.Fatalf("want the v1alpha1 import's IP, got %v", got)
	}
}

// A cluster that serves both versions, as the MCS API CRDs do, has its
// imports read once, in v1beta1: an informer per version would hold every
// import twice.
func TestServiceImportsWatchedOnce(t *testing.T) {
	f := newUnstartedFixture(t, baseConfig())
	for _, gv := range []schema.GroupVersion{mcsv1a1.SchemeGroupVersion, mcsv1b1.SchemeGroupVersion} {
		f.kube.Resources = append(f.kube.Resources, &metav1.APIResourceList{
			GroupVersion: gv.String(),
			APIResources: []metav1.APIResource{{Name: "serviceimports", Namespaced: true, Kind: "ServiceImport"}},
		})
	}
	if err := f.m.watcher.start(); err != nil {
		t.Fatal(err)
	}
	defer f.m.watcher.stop()
	var started []reflect.Type
	for _, factory := range f.m.watcher.factories {
		if m, ok := factory.(mcsinformers.SharedInformerFactory); ok {
			started = slices.AppendSeq(started, maps.Keys(m.WaitForCacheSync(nil)))
		}
	}
	if want := reflect.TypeFor[*mcsv1b1.ServiceImport](); len(started) != 1 || started[0] != want {
		t.Fatalf("ServiceImport informers started: %v, want %v alone", started, want)
	}
}

// The controller's derived-<svc> Services are left out of what mcs reads,
// at the API server: a user's Service of such a name is not.
func TestDerivedServicesLeftOut(t *testing.T) {
	derived := serviceObj("ns", api.DerivedPrefix+"web", []string{"10.96.5.5"}, httpPort)
	derived.Labels = map[string]string{api.LabelManagedBy: api.ManagedBy}
	users := serviceObj("ns", api.DerivedPrefix+"db", []string{"10.96.5.6"}, httpPort)
	f := newFixture(t, baseConfig(), derived, users,
		importObj("ns", "web", []string{"10.50.0.1"}, []portSpec{httpPort}, withStrategy("RemoteAndLocal")))
	var selectors []string
	for _, a := range f.kube.Actions() {
		if l, ok := a.(k8stesting.ListActionImpl); ok && l.GetResource().Resource == "services" {
			selectors = append(selectors, l.GetListOptions().LabelSelector)
		}
	}
	if want := []string{"app.kubernetes.io/managed-by!=mcs-controller.coredns-mcs.io"}; !slices.Equal(selectors, want) {
		t.Errorf("Service lists with selectors %q, want %q", selectors, want)
	}
	f.m.idx.mu.RLock()
	defer f.m.idx.mu.RUnlock()
	if v := f.m.idx.views[svcKey{"ns", derived.Name}]; v != nil {
		t.Errorf("the controller's %s is read: %+v", derived.Name, v.svc)
	}
	if v := f.m.idx.views[svcKey{"ns", users.Name}]; v == nil || v.svc == nil {
		t.Errorf("the user's %s is not read", users.Name)
	}
}

// Without the MCS CRDs a cluster has no imports: the plugin is ready, passes
// every native name on, and picks ServiceImports up once they are served,
// without a restart.
func TestServiceImportNotServed(t *testing.T) {
	f := newUnstartedFixture(t, baseConfig(),
		importObj("demo", "serve", []string{vipSet}, nil, withStrategy(string(api.RemoteAndLocal))))
	var served atomic.Bool
	f.kube.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
		if served.Load() {
			return false, nil, nil // discovery answers from f.kube.Resources
		}
		return true, nil, apierrors.NewNotFound(schema.GroupResource{}, mcsv1b1.SchemeGroupVersion.String())
	})
	f.m.watcher.importPoll = 50 * time.Millisecond
	if err := f.m.watcher.start(); err != nil {
		t.Fatal(err)
	}
	defer f.m.watcher.stop()
	if !f.m.Ready() {
		t.Fatal("not ready after start without ServiceImports")
	}
	for deadline := time.Now().Add(300 * time.Millisecond); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp := f.query(serveName, dns.TypeA); !passedOn(resp) {
			t.Fatalf("without ServiceImports a native name goes on, got\n%s", resp)
		}
	}
	if resp := f.query("serve.demo.svc.clusterset.local.", dns.TypeA); resp.Rcode != dns.RcodeNameError {
		t.Fatalf("without ServiceImports a clusterset name does not exist, got\n%s", resp)
	}
	if got := testutil.ToFloat64(informersSynced.WithLabelValues("serviceimports")); got != 0 {
		t.Fatalf("informers_synced{resource=serviceimports} = %v without ServiceImports", got)
	}
	served.Store(true)
	f.waitFor(func() bool { return testutil.ToFloat64(informersSynced.WithLabelValues("serviceimports")) == 1 }, "ServiceImports to sync once served")
	if got := addresses(f.query(serveName, dns.TypeA)); !equal(got, vipSet) {
		t.Fatalf("want the native name answered by RemoteAndLocal once served, got %v", got)
	}
	if got := addresses(f.query("serve.demo.svc.clusterset.local.", dns.TypeA)); !equal(got, vipSet) {
		t.Fatalf("want the import's IP once served, got %v", got)
	}
	for _, r := range watchedResources {
		if got := testutil.ToFloat64(informersSynced.WithLabelValues(r)); got != 1 {
			t.Errorf("informers_synced{resource=%q} = %v once served", r, got)
		}
	}
}

// An unreachable API server: start-up returns after its timeout without an
// error, the plugin is not ready and says why in api_status, native names
// go on, clusterset names get SERVFAIL, and shutting down works.
func TestUnreachableAPIServer(t *testing.T) {
	cl, err := newClients(&rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := newMCS(baseConfig(), cl)
	m.Next = test.HandlerFunc(answerFromNext)
	m.watcher.startupTimeout = 300 * time.Millisecond
	if err := m.watcher.start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	if m.Ready() {
		t.Fatal("ready without an API server")
	}
	if resp := serve(t, m, serveName, dns.TypeA); !passedOn(resp) {
		t.Fatalf("want the next plugin's answer, got\n%s", resp)
	}
	if resp := serve(t, m, "serve.demo.svc.clusterset.local.", dns.TypeA); resp.Rcode != dns.RcodeServerFailure {
		t.Fatalf("want SERVFAIL, got\n%s", resp)
	}
	if got := testutil.ToFloat64(apiStatusGauge.WithLabelValues(string(apiUnreachable))); got != 1 {
		t.Fatalf("api_status{status=unreachable} = %v", got)
	}
	if err := m.watcher.stop(); err != nil {
		t.Fatal(err)
	}
}

// readiness is a plugin of the same server that says when it is ready,
// counting the times it was asked.
type readiness struct {
	ready atomic.Bool
	asked atomic.Int32
}

func (r *readiness) Ready() bool {
	r.asked.Add(1)
	return r.ready.Load()
}

// Once synced, mcs returns the initial lists' free memory to the OS once,
// and only when the server's other plugins have synced too: they list into
// the same heap.
func TestSyncGarbageAfterPeers(t *testing.T) {
	f := newUnstartedFixture(t, baseConfig())
	peer := &readiness{}
	var freed atomic.Int32
	f.m.watcher.peers = []ready.Readiness{peer}
	f.m.watcher.peerPoll = 10 * time.Millisecond
	f.m.watcher.freeMemory = func() { freed.Add(1) }
	if err := f.m.watcher.start(); err != nil || !f.m.Ready() {
		t.Fatalf("not ready after start: %v", err)
	}
	f.waitFor(func() bool { return peer.asked.Load() >= 3 }, "the server's other plugin asked three times")
	if n := freed.Load(); n != 0 {
		t.Fatalf("memory returned %d times while a plugin of the server was still syncing", n)
	}
	peer.ready.Store(true)
	f.waitFor(func() bool { return freed.Load() == 1 }, "the memory returned once the server's plugins synced")
	asked := peer.asked.Load()
	_ = f.m.watcher.stop()
	if n, again := freed.Load(), peer.asked.Load(); n != 1 || again != asked {
		t.Fatalf("memory returned %d times, the plugin asked %d times more after: want once, and no more asking", n, again-asked)
	}
}
