package controller

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsapifake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsfake "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned/fake"
	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The unit tests of sync run the controller against a hub and three members
// made of fake clientsets, as Kubernetes' own controllers are tested: they
// call sync for a key and compare the exact writes each cluster received.
// The fakes act as an API server where the controller depends on it: they
// stamp a UID and a growing resourceVersion on every write, and allocate a
// ClusterIP to a Service that is not headless.

const (
	hub = "hub"
	m1  = "member1"
	m2  = "member2"
	m3  = "member3"
	ns  = "demo"
	// controllerNamespace is the controller's own, on the hub.
	controllerNamespace = "mcs-system"
)

var memberNames = []string{m1, m2, m3}

// world is the objects each cluster ("hub" or a member) holds at the start.
type world map[string][]runtime.Object

type fixture struct {
	t       *testing.T
	hubKube *k8sfake.Clientset
	hubMCS  *mcsfake.Clientset
	kube    map[string]*k8sfake.Clientset
	mcs     map[string]*mcsapifake.Clientset
	alpha   map[string]bool // members serving the MCS API's v1alpha1 only

	c    *Controller
	reg  *members.Registry
	stop context.CancelFunc

	mu   sync.Mutex
	log  map[string][]clienttesting.Action // writes by cluster, in order
	down map[string]bool                   // members whose probes fail
	// synced names the members whose controller was told they synced,
	// since the controller started.
	synced map[string]bool

	noCRD atomic.Bool // the hub serves no MultiClusterService

	opts       Options             // what the controller runs with, besides clients
	bounds     map[string][]string // members' --export-namespaces
	maxObjects int                 // --member-max-objects
	maxBytes   int64               // --member-max-mib, in bytes
	maxExports int                 // --member-max-exports
	// noNamespaces: without --create-namespaces.
	noNamespaces bool
	// registration, when set, changes how the members are registered
	// (rotation_test.go: by Secrets on the hub).
	registration func(*members.Options)
	// prepare, when set, changes the fakes before the controller starts
	// (a reactor added later would race with the fakes' readers).
	prepare  func(*fixture)
	informed informed
}

// informed notes, by member and resource, the latest list and the latest
// watch of the members' informers, as numbers in one sequence. A fake API
// server (client-go's tracker) tells a watch that starts from a list's
// resourceVersion of the objects made or changed since, but not of those
// deleted since, which a real one does: a delete made after an informer
// has listed and before it watches is never seen. A test waits for the
// watches before it changes a member that has just listed (watching).
type informed struct {
	mu          sync.Mutex
	seq         int
	list, watch map[string]int // by cluster/resource
}

// note records an informer's list or watch of resource in cluster. A list
// without a resourceVersion is no informer's (the token check's).
func (in *informed) note(cluster string, a clienttesting.Action) {
	var opts metav1.ListOptions
	switch a := a.(type) {
	case clienttesting.ListActionImpl:
		opts = a.ListOptions
	case clienttesting.WatchActionImpl:
		opts = a.ListOptions
	}
	if opts.ResourceVersion == "" && a.GetVerb() == "list" {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.list == nil {
		in.list, in.watch = map[string]int{}, map[string]int{}
	}
	in.seq++
	k := cluster + "/" + a.GetResource().Resource
	if a.GetVerb() == "list" {
		in.list[k] = in.seq
	} else {
		in.watch[k] = in.seq
	}
}

// watching reports whether every informer of cluster that listed has
// watched since.
func (in *informed) watching(cluster string) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	for k, l := range in.list {
		if strings.HasPrefix(k, cluster+"/") && in.watch[k] < l {
			return false
		}
	}
	return true
}

// noteInformers makes the fake of cluster note its informers' lists and
// watches. The watch is noted under the fake's lock, which every write
// takes too: no write falls between the note and the watch's start.
func (f *fixture) noteInformers(cluster string, fake *clienttesting.Fake) {
	fake.PrependReactor("list", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.informed.note(cluster, a)
		return false, nil, nil
	})
	fake.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		f.informed.note(cluster, a)
		return false, nil, nil
	})
}

// option changes a fixture before its controller starts.
type option func(*fixture)

// alphaMembers serve the MCS API's v1alpha1 only.
func alphaMembers(names ...string) option {
	return func(f *fixture) {
		for _, n := range names {
			f.alpha[n] = true
		}
	}
}

// withOptions runs the controller with its namespace and allowed exports.
func withOptions(o Options) option { return func(f *fixture) { f.opts = o } }

// withoutNamespaces runs the controller without --create-namespaces, which
// the other tests give it: their worlds leave namespaces out.
func withoutNamespaces() option { return func(f *fixture) { f.noNamespaces = true } }

// withBounds bounds the namespaces members export from, by member.
func withBounds(b map[string][]string) option { return func(f *fixture) { f.bounds = b } }

// withMaxObjects bounds the objects each member's informers may hold.
func withMaxObjects(n int) option { return func(f *fixture) { f.maxObjects = n } }

// withMaxExports bounds the exports of each member that are used.
func withMaxExports(n int) option { return func(f *fixture) { f.maxExports = n } }

// withMaxBytes bounds what each member's objects may take held.
func withMaxBytes(n int64) option { return func(f *fixture) { f.maxBytes = n } }

// withDown starts members whose probes fail: they never sync.
func withDown(names ...string) option {
	return func(f *fixture) {
		for _, n := range names {
			f.down[n] = true
		}
	}
}

// withoutCRD: the hub serves no MultiClusterService until serveCRD.
func withoutCRD() option { return func(f *fixture) { f.noCRD.Store(true) } }

func newFixture(t *testing.T, w world, opts ...option) *fixture {
	t.Helper()
	// mcs-api's fake cannot stream a list to an informer.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	f := &fixture{t: t, log: map[string][]clienttesting.Action{}, down: map[string]bool{}, kube: map[string]*k8sfake.Clientset{}, mcs: map[string]*mcsapifake.Clientset{}, alpha: map[string]bool{}}
	for _, o := range opts {
		o(f)
	}
	var rv atomic.Int64
	// An API server gives every object a resourceVersion.
	for _, objs := range w {
		for _, o := range objs {
			m, _ := meta.Accessor(o)
			m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
	}
	kube, mcs := split(w[hub], false)
	f.hubKube = k8sfake.NewSimpleClientset(kube...)
	f.hubMCS = mcsfake.NewSimpleClientset(mcs...)
	f.hubMCS.Resources = []*metav1.APIResourceList{{GroupVersion: v1alpha1.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{
		{Name: v1alpha1.MultiClusterServiceResource.Resource, Namespaced: true},
	}}}
	// Discovery reads Resources unlocked: a reactor hides them instead.
	f.hubMCS.PrependReactor("get", "resource", func(clienttesting.Action) (bool, runtime.Object, error) {
		if f.noCRD.Load() {
			return true, nil, apierrors.NewNotFound(v1alpha1.Resource("multiclusterservices"), "")
		}
		return false, nil, nil
	})
	f.stamp(hub, &f.hubKube.Fake, &rv)
	f.stamp(hub, &f.hubMCS.Fake, &rv)
	for _, name := range memberNames {
		kube, mcs := split(w[name], f.alpha[name])
		f.kube[name] = k8sfake.NewSimpleClientset(kube...)
		f.mcs[name] = mcsapifake.NewSimpleClientset(mcs...)
		f.kube[name].Resources = servedMCSAPI(f.alpha[name])
		f.stamp(name, &f.kube[name].Fake, &rv)
		f.stamp(name, &f.mcs[name].Fake, &rv)
		f.noteInformers(name, &f.kube[name].Fake)
		f.noteInformers(name, &f.mcs[name].Fake)
	}
	if f.prepare != nil {
		f.prepare(f)
	}
	f.start()
	return f
}

// start runs a controller and its members over the fakes, as
// mcs-controller does but with no workers: the tests call sync.
func (f *fixture) start() {
	t := f.t
	f.mu.Lock()
	f.synced = map[string]bool{}
	f.mu.Unlock()
	var ms []*members.Member
	for _, name := range memberNames {
		ms = append(ms, members.New(name, "fake "+name, f.kube[name], f.mcs[name]))
	}
	regOpts := members.Options{
		Members: ms, ProbeEvery: 10 * time.Millisecond,
		Ready: f.ready, ExportNamespaces: f.bounds, MaxObjects: f.maxObjects, MaxBytes: f.maxBytes, MaxExports: f.maxExports, Namespaces: f.opts.Namespaces,
		Selector: f.selector(), Clock: f.opts.Clock,
	}
	if f.registration != nil {
		f.registration(&regOpts)
	}
	reg, err := members.NewRegistry(regOpts)
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	opts := f.opts
	opts.HubKube, opts.HubMCS, opts.Members, opts.Workers = f.hubKube, f.hubMCS, reg, 1
	opts.Namespace = cmp.Or(opts.Namespace, controllerNamespace)
	opts.CreateNamespaces = !f.noNamespaces
	f.c = New(opts)
	f.c.crdPoll = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h := f.c.Handlers()
	changed := h.Changed
	h.Changed = func(name string) {
		changed(name)
		f.noteAnnounced(reg, name)
	}
	go func() {
		defer close(done)
		reg.Run(ctx, h)
	}()
	f.stop = func() {
		cancel()
		<-done
		f.c.queue.ShutDown()
		f.c.shutdown()
	}
	t.Cleanup(f.stop)
	if err := f.c.start(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, pending := reg.Settled(); !ok {
		t.Fatalf("members not settled: %s", pending)
	}
	f.await("the informers of every healthy member watch, and its sync was told", func() bool {
		return !slices.ContainsFunc(reg.List(), func(m *members.Member) bool {
			return m.Healthy() && (!f.informed.watching(m.Name) || !f.announced(m.Name))
		})
	})
}

// noteAnnounced records that the controller was told of a change of
// member name's that found it synced: what queues every service once the
// member's informers have synced, which a test that counts what is queued
// must see before it starts.
func (f *fixture) noteAnnounced(reg *members.Registry, name string) {
	for _, m := range reg.List() {
		if m.Name == name && m.Synced() {
			f.mu.Lock()
			f.synced[name] = true
			f.mu.Unlock()
		}
	}
}

func (f *fixture) announced(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.synced[name]
}

// selector is the registry's label selector: the shards' when the
// controller holds some.
func (f *fixture) selector() func() string {
	if f.opts.Shards == nil {
		return nil
	}
	return f.opts.Shards.Selector
}

// serveCRD makes the hub serve MultiClusterServices, as installing the
// CRD does.
// drainUntil takes every key the controller queues into got, stepping fc
// by step after each round, until done or timeout: what a test of pacing
// reads of the queue without syncing.
func (f *fixture) drainUntil(fc *clocktesting.FakeClock, got map[string]bool, timeout time.Duration, done func() bool, step time.Duration) error {
	return wait.PollUntilContextTimeout(f.t.Context(), time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		for f.c.queue.Len() > 0 {
			k, _ := f.c.queue.Get()
			f.c.queue.Done(k)
			got[k] = true
		}
		fc.Step(step)
		return done(), nil
	})
}

func (f *fixture) serveCRD() { f.noCRD.Store(false) }

// ready is the probe of a fake member: it answers unless it is down.
func (f *fixture) ready(_ context.Context, m *members.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down[m.Name] {
		return fmt.Errorf("dial tcp: connection refused")
	}
	return nil
}

// setDown makes a member's probes fail or succeed, and waits until the
// registry says so.
func (f *fixture) setDown(name string, down bool) {
	f.t.Helper()
	f.mu.Lock()
	f.down[name] = down
	f.mu.Unlock()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		ok, _ := f.member(name).Reachable()
		return ok == !down, nil
	})
	if err != nil {
		f.t.Fatalf("%s never became reachable=%v", name, !down)
	}
}

// restart stops the controller and starts a new one over the same fakes.
func (f *fixture) restart() {
	f.stop()
	f.start()
}

// split sorts objects by the fake that holds them; a member serving
// v1alpha1 only holds the MCS API objects in that version.
func split(objs []runtime.Object, alpha bool) (kube, mcs []runtime.Object) {
	for _, o := range objs {
		switch o := o.(type) {
		case *mcsv1b1.ServiceExport:
			if alpha {
				mcs = append(mcs, mcsapi.ExportToAlpha(o))
			} else {
				mcs = append(mcs, o)
			}
		case *mcsv1b1.ServiceImport:
			if alpha {
				mcs = append(mcs, mcsapi.ImportToAlpha(o))
			} else {
				mcs = append(mcs, o)
			}
		case *v1alpha1.MultiClusterService:
			mcs = append(mcs, o)
		default:
			kube = append(kube, o)
		}
	}
	return kube, mcs
}

func servedMCSAPI(alpha bool) []*metav1.APIResourceList {
	gv := mcsv1b1.SchemeGroupVersion.String()
	if alpha {
		gv = mcsapi.Versions[1].String()
	}
	return []*metav1.APIResourceList{{GroupVersion: gv, APIResources: []metav1.APIResource{
		{Name: mcsapi.ServiceExports, Namespaced: true}, {Name: mcsapi.ServiceImports, Namespaced: true},
	}}}
}

// stamp makes the fake do on every write what the API server does that
// the controller relies on, and logs the write.
func (f *fixture) stamp(cluster string, fake *clienttesting.Fake, rv *atomic.Int64) {
	fake.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !slices.Contains([]string{"create", "update", "delete", "patch"}, a.GetVerb()) || a.GetResource().Resource == "events" {
			return false, nil, nil
		}
		defer f.logWrite(cluster, a)
		var obj runtime.Object
		switch a := a.(type) {
		case clienttesting.CreateAction:
			obj = a.GetObject()
		case clienttesting.UpdateAction:
			obj = a.GetObject()
		case clienttesting.PatchAction:
			return f.mergePatch(cluster, a, rv)
		default:
			return false, nil, nil
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, nil
		}
		if a.GetSubresource() == "status" {
			f.statusOnly(cluster, a.GetResource(), obj)
		}
		if a.GetVerb() == "create" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", rv.Add(1))))
		}
		// The generation of the ServiceImports the controller writes, whose
		// conditions observe it: as if every update changed the spec.
		if a.GetResource().Resource == "serviceimports" && a.GetSubresource() == "" {
			m.SetGeneration(m.GetGeneration() + 1)
		}
		if s, ok := obj.(*corev1.Service); ok && s.Spec.ClusterIP != corev1.ClusterIPNone {
			allocate(s, rv.Load())
		}
		m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		return false, nil, nil
	})
}

// statusOnly makes a status update change nothing but the status, as
// the status subresource of an API server does: obj becomes the stored
// object with obj's status (and resourceVersion, which the update
// checks).
func (f *fixture) statusOnly(cluster string, gvr schema.GroupVersionResource, obj runtime.Object) {
	m, _ := meta.Accessor(obj)
	stored, err := f.tracker(cluster, gvr.Resource).Get(gvr, m.GetNamespace(), m.GetName())
	if err != nil {
		return // the update fails as it is
	}
	merged, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	sent, err2 := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err = errors.Join(err, err2); err == nil {
		merged["status"] = sent["status"]
		err = unstructured.SetNestedField(merged, m.GetResourceVersion(), "metadata", "resourceVersion")
	}
	if err == nil {
		reflect.ValueOf(obj).Elem().SetZero()
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(merged, obj)
	}
	if err != nil {
		f.t.Errorf("%s: status update of %s %s: %v", cluster, gvr.Resource, m.GetName(), err)
	}
}

// mergePatch applies a merge patch as an API server does: a resourceVersion
// in the patch is a precondition, and the object gets a new one.
func (f *fixture) mergePatch(cluster string, a clienttesting.PatchAction, rv *atomic.Int64) (bool, runtime.Object, error) {
	if a.GetPatchType() != types.MergePatchType {
		f.t.Errorf("%s: %s: only merge patches are faked, got %s", cluster, describe(a), a.GetPatchType())
		return true, nil, apierrors.NewBadRequest("unsupported patch type")
	}
	tr := f.tracker(cluster, a.GetResource().Resource)
	stored, err := tr.Get(a.GetResource(), a.GetNamespace(), a.GetName())
	if err != nil {
		return true, nil, err
	}
	var pre struct {
		Metadata struct{ ResourceVersion string } `json:"metadata"`
	}
	if err := json.Unmarshal(a.GetPatch(), &pre); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	m, _ := meta.Accessor(stored)
	if v := pre.Metadata.ResourceVersion; v != "" && v != m.GetResourceVersion() {
		return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), a.GetName(), fmt.Errorf("resourceVersion %s, stored %s", v, m.GetResourceVersion()))
	}
	js, err := json.Marshal(stored)
	if err == nil {
		js, err = jsonpatch.MergePatch(js, a.GetPatch())
	}
	obj := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
	if err == nil {
		err = json.Unmarshal(js, obj)
	}
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	m, _ = meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
	return true, obj, tr.Update(a.GetResource(), obj, a.GetNamespace())
}

// allocate gives a Service the ClusterIPs a dual-stack API server would,
// IPv4 first by default: one of each family its policy asks for, keeping
// those it has. A Service that states no policy gets one IPv4 address.
func allocate(s *corev1.Service, n int64) {
	primary, other := corev1.IPv4Protocol, corev1.IPv6Protocol
	if len(s.Spec.IPFamilies) > 0 && s.Spec.IPFamilies[0] == corev1.IPv6Protocol {
		primary, other = other, primary
	}
	families := []corev1.IPFamily{primary}
	if p := s.Spec.IPFamilyPolicy; p != nil && *p != corev1.IPFamilyPolicySingleStack {
		families = append(families, other)
	}
	var ips []string
	for i, family := range families {
		switch {
		case i < len(s.Spec.ClusterIPs):
			ips = append(ips, s.Spec.ClusterIPs[i])
		case family == corev1.IPv6Protocol:
			ips = append(ips, fmt.Sprintf("fd00::%x", n%250+1))
		default:
			ips = append(ips, fmt.Sprintf("10.96.0.%d", n%250+1))
		}
	}
	if s.Spec.IPFamilyPolicy != nil {
		s.Spec.IPFamilies = families
	}
	s.Spec.ClusterIPs, s.Spec.ClusterIP = ips, ips[0]
}

func (f *fixture) logWrite(cluster string, a clienttesting.Action) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log[cluster] = append(f.log[cluster], a.DeepCopy())
}

// sync runs one sync of key and returns the writes each cluster received,
// in order; it waits until the caches hold what was written, as the next
// sync of a running controller would mostly find them. A sync that fails
// fails the test: the queue would retry it forever, each retry a sync.
func (f *fixture) sync(key string) map[string][]string {
	f.t.Helper()
	return f.syncFailing(key, "")
}

// syncFailing is sync for a sync that must fail with an error saying
// want, which the queue retries with back-off ("": must not fail).
func (f *fixture) syncFailing(key, want string) map[string][]string {
	f.t.Helper()
	f.writes()
	f.checkSyncError(key, want, f.c.sync(context.Background(), key))
	return f.settled()
}

// checkSyncError fails the test unless err is what a sync of key should
// end with: nil, or an error saying want.
func (f *fixture) checkSyncError(key, want string, err error) {
	f.t.Helper()
	switch {
	case want == "" && err != nil:
		f.t.Errorf("sync %s failed, and would be retried: %v", key, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		f.t.Errorf("sync %s: error %v, want one saying %q", key, err, want)
	}
}

// settled is the writes since the last call, by cluster, once the
// controller's caches hold each.
func (f *fixture) settled() map[string][]string {
	f.t.Helper()
	got := map[string][]string{}
	for cluster, actions := range f.writes() {
		for _, a := range actions {
			got[cluster] = append(got[cluster], describe(a))
			f.awaitCached(cluster, a)
		}
	}
	return got
}

// change makes a write in a cluster as a user or another controller
// would, and waits until the controller's caches have it.
func (f *fixture) change(cluster string, obj runtime.Object, verb string) {
	f.t.Helper()
	var err error
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		err = write(f.kube[cluster].DiscoveryV1().EndpointSlices(o.Namespace), verb, o, o.Name)
	case *corev1.Service:
		err = write(f.kube[cluster].CoreV1().Services(o.Namespace), verb, o, o.Name)
	case *mcsv1b1.ServiceExport:
		err = write(f.mcs[cluster].MulticlusterV1beta1().ServiceExports(o.Namespace), verb, o, o.Name)
	case *mcsv1b1.ServiceImport:
		err = write(f.mcs[cluster].MulticlusterV1beta1().ServiceImports(o.Namespace), verb, o, o.Name)
	case *v1alpha1.MultiClusterService:
		err = write(f.hubMCS.McsV1alpha1().MultiClusterServices(o.Namespace), verb, o, o.Name)
	case *corev1.ConfigMap:
		err = write(f.hubKube.CoreV1().ConfigMaps(o.Namespace), verb, o, o.Name)
	case *corev1.Namespace:
		err = write(f.kubeOf(cluster).CoreV1().Namespaces(), verb, o, o.Name)
	default:
		f.t.Fatalf("change: %T is not handled", obj)
	}
	if err != nil {
		f.t.Fatalf("%s %T in %s: %v", verb, obj, cluster, err)
	}
	for _, a := range f.writes()[cluster] {
		f.awaitCached(cluster, a)
	}
}

// typedClient is what every typed client of client-gen has.
type typedClient[T any] interface {
	Create(context.Context, *T, metav1.CreateOptions) (*T, error)
	Update(context.Context, *T, metav1.UpdateOptions) (*T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func write[T any](c typedClient[T], verb string, obj *T, name string) error {
	ctx := context.Background()
	var err error
	switch verb {
	case "create":
		_, err = c.Create(ctx, obj, metav1.CreateOptions{})
	case "update":
		_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	default:
		err = c.Delete(ctx, name, metav1.DeleteOptions{})
	}
	return err
}

// writes are the writes since the last call, by cluster; Events are left
// out (they are sent apart).
func (f *fixture) writes() map[string][]clienttesting.Action {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = map[string][]clienttesting.Action{}
	return out
}

// describe is an action as the tests spell it: "create serviceimports
// demo/foo", "update serviceimports/status demo/foo".
func describe(a clienttesting.Action) string {
	res := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	name := nameOf(a)
	if ns := a.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return a.GetVerb() + " " + res + " " + name
}

// nameOf is the name of the object a write acts on.
func nameOf(a clienttesting.Action) string {
	switch a := a.(type) {
	case clienttesting.CreateAction:
		m, _ := meta.Accessor(a.GetObject())
		return m.GetName()
	case clienttesting.UpdateAction:
		m, _ := meta.Accessor(a.GetObject())
		return m.GetName()
	case clienttesting.DeleteAction:
		return a.GetName()
	case clienttesting.PatchAction:
		return a.GetName()
	}
	return ""
}

// awaitCached waits until the controller's caches hold the object action
// wrote as the fake holds it now.
func (f *fixture) awaitCached(cluster string, a clienttesting.Action) {
	f.t.Helper()
	name := nameOf(a)
	// What the fake holds is read afresh at each poll: a write that a hung
	// member's sync left under way may land meanwhile.
	var want string
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		want = "" // absent
		if obj, err := f.tracker(cluster, a.GetResource().Resource).Get(a.GetResource(), a.GetNamespace(), name); err == nil {
			m, _ := meta.Accessor(obj)
			want = m.GetResourceVersion()
		}
		return f.cachedVersion(cluster, a.GetResource().Resource, a.GetNamespace(), name) == want, nil
	})
	if err != nil {
		f.t.Fatalf("%s: the controller's cache never saw %s (resourceVersion %q)", cluster, describe(a), want)
	}
}

// kubeOf is the fake Kubernetes clientset of cluster.
func (f *fixture) kubeOf(cluster string) *k8sfake.Clientset {
	if cluster == hub {
		return f.hubKube
	}
	return f.kube[cluster]
}

// tracker is the store of the fake that holds resource in cluster.
func (f *fixture) tracker(cluster, resource string) clienttesting.ObjectTracker {
	mcs := resource == "serviceimports" || resource == "serviceexports"
	switch {
	case cluster == hub && resource == "multiclusterservices":
		return f.hubMCS.Tracker()
	case cluster == hub:
		return f.hubKube.Tracker()
	case mcs:
		return f.mcs[cluster].Tracker()
	}
	return f.kube[cluster].Tracker()
}

// cachedVersion is the resourceVersion of an object in the controller's
// caches, "" when absent, "?" for what they do not hold.
func (f *fixture) cachedVersion(cluster, resource, namespace, name string) string {
	switch {
	case cluster == hub && resource == "multiclusterservices":
		return versionOf(f.c.hub.get(namespace, name))
	case cluster == hub && resource == "configmaps":
		return versionOf(f.c.ages.cached(trackKey{namespace: namespace, name: name}))
	case cluster == hub && resource == "namespaces":
		obj, _, _ := f.c.hubNamespaces.GetStore().GetByKey(name)
		n, _ := obj.(*corev1.Namespace)
		return versionOf(n)
	case cluster == hub:
		return "?"
	}
	m := f.member(cluster)
	switch resource {
	case "services":
		return versionOf(m.Service(namespace, name))
	case "endpointslices":
		return versionOf(m.Slice(namespace, name))
	case "serviceimports":
		return versionOf(m.Import(namespace, name))
	case "serviceexports":
		return versionOf(m.Export(namespace, name))
	case "namespaces":
		if m.HasNamespace(name) {
			return f.namespaceVersion(cluster, name)
		}
		return ""
	}
	return "?"
}

func versionOf[T any, P interface {
	*T
	metav1.Object
}](o P) string {
	if o == nil {
		return ""
	}
	return o.GetResourceVersion()
}

func (f *fixture) namespaceVersion(cluster, name string) string {
	n, err := f.kube[cluster].CoreV1().Namespaces().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return n.ResourceVersion
}

func (f *fixture) member(name string) *members.Member {
	for _, m := range f.reg.List() {
		if m.Name == name {
			return m
		}
	}
	f.t.Fatalf("no member %s", name)
	return nil
}

// Objects of the tests' world.

// service is a member's Service name, with one port http/80; headless
// when asked.
func service(name string, headless bool, created time.Time) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("svc-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, Selector: map[string]string{"app": name},
			Ports:     []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
			ClusterIP: "10.96.1.1", ClusterIPs: []string{"10.96.1.1"},
		},
	}
	if headless {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
	}
	return s
}

// slice is a member's own EndpointSlice of service svc, as
// kube-controller-manager writes it, with a ready endpoint per address.
func slice(svc, name string, generation int64, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Generation: generation, UID: types.UID("slice-" + name),
			Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func export(name string, created time.Time) *mcsv1b1.ServiceExport {
	return &mcsv1b1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("export-" + name), CreationTimestamp: metav1.NewTime(created)}}
}

// multiClusterService is a hub MultiClusterService; with finalizer, as
// the controller leaves it after its first sync.
func multiClusterService(name string, strategy api.Strategy, provision, consumption []v1alpha1.ClusterName, finalizer bool) *v1alpha1.MultiClusterService {
	m := &v1alpha1.MultiClusterService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("mcs-" + name), Generation: 1},
		Spec: v1alpha1.MultiClusterServiceSpec{
			Types: []v1alpha1.ExposureType{v1alpha1.CrossCluster}, Strategy: strategy,
			ServiceProvisionClusters: provision, ServiceConsumptionClusters: consumption,
		},
	}
	if finalizer {
		m.Finalizers = []string{v1alpha1.Finalizer}
	}
	return m
}

// importOf, exportOf, serviceOf, sliceOf and mcsOf read an object back
// from a fake.
func (f *fixture) importOf(cluster, name string) *mcsv1b1.ServiceImport {
	f.t.Helper()
	if f.alpha[cluster] {
		return mcsapi.ImportToBeta(get(f.t, f.mcs[cluster].MulticlusterV1alpha1().ServiceImports(ns), cluster, name))
	}
	return get(f.t, f.mcs[cluster].MulticlusterV1beta1().ServiceImports(ns), cluster, name)
}

func (f *fixture) exportOf(cluster, name string) *mcsv1b1.ServiceExport {
	f.t.Helper()
	if f.alpha[cluster] {
		return mcsapi.ExportToBeta(get(f.t, f.mcs[cluster].MulticlusterV1alpha1().ServiceExports(ns), cluster, name))
	}
	return get(f.t, f.mcs[cluster].MulticlusterV1beta1().ServiceExports(ns), cluster, name)
}

func (f *fixture) serviceOf(cluster, name string) *corev1.Service {
	f.t.Helper()
	return get(f.t, f.kube[cluster].CoreV1().Services(ns), cluster, name)
}

func (f *fixture) sliceOf(cluster, name string) *discoveryv1.EndpointSlice {
	f.t.Helper()
	return get(f.t, f.kube[cluster].DiscoveryV1().EndpointSlices(ns), cluster, name)
}

func (f *fixture) mcsOf(name string) *v1alpha1.MultiClusterService {
	f.t.Helper()
	return get(f.t, f.hubMCS.McsV1alpha1().MultiClusterServices(ns), hub, name)
}

type getter[T any] interface {
	Get(context.Context, string, metav1.GetOptions) (*T, error)
}

func get[T any](t *testing.T, c getter[T], cluster, name string) *T {
	t.Helper()
	o, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s: %T %s: %v", cluster, o, name, err)
	}
	return o
}

// conds are a MultiClusterService's or ServiceExport's conditions as
// type: status/reason.
func conds(cs []metav1.Condition) map[string]string {
	out := map[string]string{}
	for _, c := range cs {
		out[c.Type] = string(c.Status) + "/" + c.Reason
	}
	return out
}
