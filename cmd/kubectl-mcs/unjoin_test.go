package main

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
)

var (
	slicesGVR  = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	importsGVR = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1beta1", Resource: "serviceimports"}
	leasesGVR  = schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
)

// fleet is the hub and members 1 to 3 on fakes, member3 the one unjoined:
// it holds what the controller wrote (an imported slice, derived-foo, its
// ServiceImport foo, a user's import bar it filled in, its Leases) beside
// a user's own objects of each kind; member1 holds the controller's Lease
// source-member3, member2 a user's Lease of that name. Every request to
// any of them is logged, in order, as "cluster verb resource ns/name".
type fleet struct {
	log     []string
	hub     *kubefake.Clientset
	member  *dynamicfake.FakeDynamicClient
	kube    map[string]*kubefake.Clientset // by cluster, for kube-system's UID and Leases
	clock   *steppingClock
	out     bytes.Buffer
	ns      string
	timeout time.Duration
	// hubAsMember: unjoin runs with --hub-as-member.
	hubAsMember bool
}

func newFleet(t *testing.T) *fleet {
	f := &fleet{ns: "mcs-system", timeout: 4 * time.Second, kube: map[string]*kubefake.Clientset{}}
	f.clock = &steppingClock{FakeClock: testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, UID: types.UID("secret-" + name), Labels: map[string]string{api.LabelCluster: name}}}
	}
	f.hub = kubefake.NewClientset(kubeSystem("hub"), secret("member1"), secret("member2"), secret("member3"))
	f.logged("hub", &f.hub.Fake)
	for _, c := range []string{"member1", "member2", "member3"} {
		f.kube[c] = kubefake.NewClientset(kubeSystem(c))
		f.logged(c, &f.kube[c].Fake)
	}
	ours := map[string]string{api.LabelManagedBy: api.ManagedBy}
	lease := func(name string, labels map[string]string) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: api.LeaseNamespace, Name: name, UID: types.UID("lease-" + name), Labels: labels}}
	}
	if err := f.kube["member1"].Tracker().Add(lease("source-member3", ours)); err != nil {
		t.Fatal(err)
	}
	if err := f.kube["member2"].Tracker().Add(lease("source-member3", nil)); err != nil {
		t.Fatal(err)
	}

	filled := object("multicluster.x-k8s.io/v1beta1", "ServiceImport", "demo", "bar", nil, map[string]string{
		api.AnnotationFilled: api.FilledStrategy, api.AnnotationStrategy: string(api.LocalFirst), "team": "shop"})
	_ = unstructured.SetNestedStringSlice(filled.Object, []string{"10.96.0.9"}, "spec", "ips")
	_ = unstructured.SetNestedSlice(filled.Object, []any{map[string]any{"cluster": "member1"}}, "status", "clusters")
	f.member = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		slicesGVR: "EndpointSliceList", {Version: "v1", Resource: "services"}: "ServiceList", importsGVR: "ServiceImportList", leasesGVR: "LeaseList",
	},
		object("discovery.k8s.io/v1", "EndpointSlice", "demo", "imported-member1-foo-x", map[string]string{discoveryv1.LabelManagedBy: api.ManagedBy}, nil),
		object("discovery.k8s.io/v1", "EndpointSlice", "demo", "foo-x", map[string]string{discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}, nil),
		object("v1", "Service", "demo", "derived-foo", ours, nil),
		object("v1", "Service", "demo", "foo", nil, nil),
		object("multicluster.x-k8s.io/v1beta1", "ServiceImport", "demo", "foo", ours, nil),
		filled,
		object("multicluster.x-k8s.io/v1beta1", "ServiceImport", "demo", "baz", nil, nil), // a user's, never filled
		object("coordination.k8s.io/v1", "Lease", api.LeaseNamespace, "source-member1", ours, nil),
		object("coordination.k8s.io/v1", "Lease", api.LeaseNamespace, "source-member3", ours, nil),
		object("coordination.k8s.io/v1", "Lease", api.LeaseNamespace, "source-mine", nil, nil), // a user's
		object("v1", "ServiceAccount", "mcs-system", "mcs-member", nil, nil),
		object("v1", "ServiceAccount", "mcs-system", "mcs-controller", nil, nil), // the account before mcs-member
	)
	f.logged("member3", &f.member.Fake)
	return f
}

// logged logs every request of c as cluster's.
func (f *fleet) logged(cluster string, c *clienttesting.Fake) {
	c.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		f.log = append(f.log, describe(cluster, a))
		return false, nil, nil
	})
}

func describe(cluster string, a clienttesting.Action) string {
	resource := a.GetResource().Resource
	if sub := a.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	what := ""
	switch a := a.(type) {
	case clienttesting.GetAction:
		what = a.GetName()
	case clienttesting.DeleteAction:
		what = a.GetName()
	case clienttesting.UpdateAction:
		what = a.GetObject().(metav1.Object).GetName()
	case clienttesting.ListAction:
		return strings.Join(slices.DeleteFunc([]string{cluster, "list", resource, a.GetNamespace(), a.GetListRestrictions().Labels.String()}, func(s string) bool { return s == "" }), " ")
	}
	if a.GetNamespace() != "" {
		what = a.GetNamespace() + "/" + what
	}
	return fmt.Sprintf("%s %s %s %s", cluster, a.GetVerb(), resource, what)
}

func (f *fleet) unjoin(member string) *unjoin {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, {Group: "discovery.k8s.io", Version: "v1"}, {Group: "multicluster.x-k8s.io", Version: "v1beta1"}, {Group: "rbac.authorization.k8s.io", Version: "v1"}, {Group: "admissionregistration.k8s.io", Version: "v1"}})
	for _, k := range []struct {
		gvk   schema.GroupVersionKind
		scope meta.RESTScope
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "Service"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "discovery.k8s.io", Version: "v1", Kind: "EndpointSlice"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "multicluster.x-k8s.io", Version: "v1beta1", Kind: "ServiceImport"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"}, meta.RESTScopeNamespace},
		{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"}, meta.RESTScopeRoot},
		{schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"}, meta.RESTScopeRoot},
	} {
		mapper.Add(k.gvk, k.scope)
	}
	return &unjoin{
		cluster: "member3", namespace: f.ns, context: member, hubAsMember: f.hubAsMember, timeout: f.timeout, clock: f.clock,
		out: &f.out, progress: &f.out, hub: f.hub,
		member: &memberClients{kube: f.kube[member], dyn: f.member, mapper: mapper},
		other:  func(c string) (kubernetes.Interface, error) { return f.kube[c], nil },
	}
}

// steppingClock is a fake clock that a wait moves on by what it waits;
// onWait, if set, runs then: the controller at work meanwhile.
type steppingClock struct {
	*testingclock.FakeClock
	onWait func()
}

func (c *steppingClock) After(d time.Duration) <-chan time.Time {
	if c.onWait != nil {
		c.onWait()
	}
	c.Step(d)
	ch := make(chan time.Time, 1)
	ch <- c.Now()
	return ch
}

func kubeSystem(cluster string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: types.UID("kube-system-of-" + cluster)}}
}

func object(apiVersion, kind, ns, name string, labels, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetUID(types.UID(kind + "-" + ns + "-" + name))
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	return u
}

// The requests of unjoin's first steps and last: the hub and the member
// told apart, the Secret deleted; then the Leases read, and at the end
// the controller's account deleted and source-member3 deleted elsewhere.
var (
	unjoinStart = []string{
		"hub get namespaces kube-system",
		"member3 get namespaces kube-system",
		"hub get secrets mcs-system/member3",
		"hub delete secrets mcs-system/member3",
	}
	listControllers = []string{
		"member3 list endpointslices endpointslice.kubernetes.io/managed-by=mcs-controller.coredns-mcs.io",
		"member3 list services app.kubernetes.io/managed-by=mcs-controller.coredns-mcs.io",
		"member3 list serviceimports",
	}
	// unjoin's own clean-up of what the controller left, a user's import
	// emptied.
	selfClean = []string{
		"member3 delete endpointslices demo/imported-member1-foo-x",
		"member3 delete services demo/derived-foo",
		"member3 update serviceimports demo/bar",
		"member3 update serviceimports/status demo/bar",
		"member3 delete serviceimports demo/foo",
	}
	listLeases   = "member3 list leases mcs-system app.kubernetes.io/managed-by=mcs-controller.coredns-mcs.io"
	deleteLeases = []string{
		"member3 delete leases mcs-system/source-member1",
		"member3 delete leases mcs-system/source-member3",
	}
	// The member account's access, then the old account's.
	removeAccess = []string{
		"member3 delete clusterroles mcs-member-namespaces",
		"member3 delete clusterrolebindings mcs-member-namespaces",
		"member3 delete serviceaccounts mcs-system/mcs-member",
		"member3 delete clusterroles mcs-member",
		"member3 delete clusterrolebindings mcs-member",
		"member3 delete roles mcs-system/mcs-member-leases",
		"member3 delete rolebindings mcs-system/mcs-member-leases",
		"member3 delete roles mcs-system/mcs-member-token",
		"member3 delete rolebindings mcs-system/mcs-member-token",
		"member3 delete validatingadmissionpolicybindings mcs-controller-member",
		"member3 delete validatingadmissionpolicies mcs-controller-member",
		"member3 delete clusterrolebindings mcs-controller-member",
		"member3 delete clusterroles mcs-controller-member",
		"member3 delete rolebindings mcs-system/mcs-controller-leases",
		"member3 delete roles mcs-system/mcs-controller-leases",
		"member3 delete rolebindings mcs-system/mcs-controller-token",
		"member3 delete roles mcs-system/mcs-controller-token",
	}
	unjoinEnd = slices.Concat(removeAccess, []string{
		"member3 delete serviceaccounts mcs-system/mcs-controller",
		"hub list secrets mcs-system mcs.coredns-mcs.io/cluster",
		"member1 get namespaces kube-system",
		"member1 get leases mcs-system/source-member3",
		"member1 delete leases mcs-system/source-member3",
		"member2 get namespaces kube-system",
		"member2 get leases mcs-system/source-member3",
	})
)

// unjoin deletes the hub's Secret first, so that the controller retires
// the member, and waits for it; when the controller has not cleaned the
// member by --timeout (4 s: lists at 0, 2 and 4 s), unjoin deletes what it
// left itself, and only what carries its label; it empties a user's
// ServiceImport the controller filled in, as the controller does, and
// leaves a user's objects alone; then it deletes the Leases source-*,
// revokes the account, and deletes source-member3 where the controller
// made it in the other members.
func TestUnjoinCleansWhatTheControllerLeft(t *testing.T) {
	f := newFleet(t)
	if err := f.unjoin("member3").run(t.Context()); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, f.out.String())
	}
	want := slices.Concat(unjoinStart, listControllers, listControllers, listControllers, []string{listLeases}, selfClean, deleteLeases, unjoinEnd)
	f.requests(t, want)
	if got := f.clock.Since(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); got != 4*time.Second {
		t.Errorf("unjoin waited %s, want the 4s of --timeout", got)
	}
	f.userObjectsKept(t)
	bar, err := f.member.Resource(importsGVR).Namespace("demo").Get(t.Context(), "bar", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips, _, _ := unstructured.NestedStringSlice(bar.Object, "spec", "ips")
	clusters, _, _ := unstructured.NestedSlice(bar.Object, "status", "clusters")
	if len(ips) > 0 || len(clusters) > 0 || !maps.Equal(bar.GetAnnotations(), map[string]string{"team": "shop"}) {
		t.Errorf("the user's import bar after unjoin: ips %v, clusters %v, annotations %v; want them emptied, its own annotation kept", ips, clusters, bar.GetAnnotations())
	}
	if !strings.Contains(f.out.String(), "member3 unjoined:") || !strings.Contains(f.out.String(), "4 objects of mcs-controller's deleted or emptied") || !strings.Contains(f.out.String(), "Lease source-member3 deleted in member1") {
		t.Errorf("unjoin said:\n%s", f.out.String())
	}
}

// When the controller cleans the member while unjoin waits, unjoin deletes
// none of it itself: it stops waiting at once and goes on.
func TestUnjoinWaitsForTheController(t *testing.T) {
	f := newFleet(t)
	f.clock.onWait = func() {
		tracker := f.member.Tracker()
		for _, o := range []struct {
			gvr      schema.GroupVersionResource
			ns, name string
		}{{slicesGVR, "demo", "imported-member1-foo-x"}, {schema.GroupVersionResource{Version: "v1", Resource: "services"}, "demo", "derived-foo"}, {importsGVR, "demo", "foo"}} {
			if err := tracker.Delete(o.gvr, o.ns, o.name); err != nil {
				t.Error(err)
			}
		}
		bar, err := tracker.Get(importsGVR, "demo", "bar")
		if err != nil {
			t.Fatal(err)
		}
		u := bar.(*unstructured.Unstructured)
		u.SetAnnotations(map[string]string{"team": "shop"})
		if err := tracker.Update(importsGVR, u, "demo"); err != nil {
			t.Error(err)
		}
		f.clock.onWait = nil
	}
	if err := f.unjoin("member3").run(t.Context()); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, f.out.String())
	}
	f.requests(t, slices.Concat(unjoinStart, listControllers, listControllers, []string{listLeases}, deleteLeases, unjoinEnd))
	f.userObjectsKept(t)
	if !strings.Contains(f.out.String(), "mcs-controller had cleaned the member") {
		t.Errorf("unjoin said:\n%s", f.out.String())
	}
}

// A member no Secret registers has nobody to clean it: unjoin waits for
// nothing and cleans it at once.
func TestUnjoinUnregistered(t *testing.T) {
	f := newFleet(t)
	if err := f.hub.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("secrets"), f.ns, "member3"); err != nil {
		t.Fatal(err)
	}
	if err := f.unjoin("member3").run(t.Context()); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, f.out.String())
	}
	f.requests(t, slices.Concat(unjoinStart[:3], listControllers, []string{listLeases}, selfClean, deleteLeases, unjoinEnd))
	if !f.clock.Now().Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("unjoin waited until %s, want no wait", f.clock.Now())
	}
}

// A member context that reaches the hub's API server is refused before
// anything is written anywhere.
func TestUnjoinRefusesTheHub(t *testing.T) {
	f := newFleet(t)
	f.kube["hub"] = f.hub
	err := f.unjoin("hub").run(t.Context())
	if err == nil || !strings.Contains(err.Error(), `context "hub" reaches the hub's API server`) {
		t.Fatalf("unjoin with the hub as the member: %v, want refused", err)
	}
	f.requests(t, []string{"hub get namespaces kube-system", "hub get namespaces kube-system"})
}

// With --hub-as-member, a member context that reaches the hub is unjoined
// like any member, but the ServiceAccount mcs-system/mcs-controller, which
// is the hub controller's own there, is left alone.
func TestUnjoinTheHubAsMember(t *testing.T) {
	f := newFleet(t)
	f.kube["hub"] = f.hub
	f.hubAsMember = true
	if err := f.unjoin("hub").run(t.Context()); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, f.out.String())
	}
	if !slices.Contains(f.log, "member3 delete serviceaccounts mcs-system/mcs-member") || slices.Contains(f.log, "member3 delete serviceaccounts mcs-system/mcs-controller") {
		t.Errorf("requests:\n  %s\nwant mcs-member's ServiceAccount deleted, mcs-controller's not", strings.Join(f.log, "\n  "))
	}
	sa := schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}
	if _, err := f.member.Tracker().Get(sa, "mcs-system", "mcs-controller"); err != nil {
		t.Errorf("the hub controller's ServiceAccount: %v, want it kept", err)
	}
}

// unjoin and join write into the member named, never the current context
// (here the hub's): without --context or --member-context they refuse
// before reaching any cluster.
func TestNoMemberContext(t *testing.T) {
	kubeconfig := unreachable(t)
	for _, sub := range []string{"join", "unjoin"} {
		out, code := run(t, sub, "member1", "--kubeconfig", kubeconfig, "--hub-context", "hub", "--request-timeout", "2s")
		if code != 1 || !strings.Contains(out, "--context (or --member-context member1=CONTEXT) names the member's kubeconfig context") || strings.Contains(out, "127.0.0.1") {
			t.Errorf("%s without --context: exit %d\n%s", sub, code, out)
		}
	}
}

// requests fails unless the fakes saw exactly want, in order.
func (f *fleet) requests(t *testing.T, want []string) {
	t.Helper()
	if !slices.Equal(f.log, want) {
		t.Errorf("requests:\n  %s\nwant:\n  %s", strings.Join(f.log, "\n  "), strings.Join(want, "\n  "))
	}
}

// userObjectsKept fails unless the user's objects in member3 and member2
// are all there.
func (f *fleet) userObjectsKept(t *testing.T) {
	t.Helper()
	for _, o := range []struct {
		gvr      schema.GroupVersionResource
		ns, name string
	}{
		{slicesGVR, "demo", "foo-x"},
		{schema.GroupVersionResource{Version: "v1", Resource: "services"}, "demo", "foo"},
		{importsGVR, "demo", "bar"},
		{importsGVR, "demo", "baz"},
		{leasesGVR, api.LeaseNamespace, "source-mine"},
	} {
		if _, err := f.member.Tracker().Get(o.gvr, o.ns, o.name); err != nil {
			t.Errorf("member3's %s %s/%s: %v, want it kept", o.gvr.Resource, o.ns, o.name, err)
		}
	}
	if _, err := f.kube["member2"].CoordinationV1().Leases(api.LeaseNamespace).Get(t.Context(), "source-member3", metav1.GetOptions{}); err != nil {
		t.Errorf("member2's own Lease source-member3: %v, want it kept", err)
	}
}
