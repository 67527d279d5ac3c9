package controller

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

func TestProtectedNames(t *testing.T) {
	for _, tc := range []struct {
		key   string
		allow []string
		want  string // in the message; "" when exported
	}{
		{"default/kubernetes", nil, "the API server's Service"},
		{"default/web", nil, ""},
		{"kube-system/kube-dns", nil, "--allow-export=kube-system/kube-dns"},
		{"kube-public/info", nil, "namespace kube-public"},
		{"kube-node-lease/x", nil, "namespace kube-node-lease"},
		{"kube-flannel/cni", nil, "namespace kube-flannel"},
		{"kubernetes-dashboard/ui", nil, ""},
		{"mcs-system/agent", nil, "coredns-mcs's Leases"},
		{"mcs-hub/agent", nil, "the controller's own"},
		{"vault/api", nil, "--protected-namespaces"},
		{"vault/api", []string{"vault/api"}, ""},
		{"demo/foo", nil, ""},
		{"kube-system/kube-dns", []string{"kube-system/kube-dns"}, ""},
		{"kube-system/metrics", []string{"kube-system/kube-dns"}, "namespace kube-system"},
		{"kube-system/metrics", []string{"kube-system"}, ""},
		{"default/kubernetes", []string{"default/kubernetes"}, ""},
	} {
		c := &Controller{opts: Options{Namespace: "mcs-hub", AllowExport: tc.allow, Protected: []string{"vault"}}}
		namespace, name, _ := strings.Cut(tc.key, "/")
		got := c.protected(namespace, name)
		if (got == "") != (tc.want == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s allowing %v: %q, want %q", tc.key, tc.allow, got, tc.want)
		}
	}
}

func TestParseProtected(t *testing.T) {
	got, err := ParseProtected(" vault, payments ,")
	if err != nil || !slices.Equal(got, []string{"vault", "payments"}) {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := ParseProtected("Vault"); err == nil || !strings.Contains(err.Error(), "Vault") {
		t.Errorf("err %v, want one naming Vault", err)
	}
}

func TestParseAllowExport(t *testing.T) {
	got, err := ParseAllowExport(" kube-system/kube-dns, monitoring ,")
	if err != nil || len(got) != 2 || got[0] != "kube-system/kube-dns" || got[1] != "monitoring" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"Kube-System", "kube-system/Kube_DNS", "a/b/c"} {
		if _, err := ParseAllowExport(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: err %v, want one naming it", bad, err)
		}
	}
}

// A Service in the controller's namespace is not exported, by a
// ServiceExport or a MultiClusterService, until the operator allows it.
func TestProtectedNotExported(t *testing.T) {
	world := world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, nil, nil, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2:  {ns1()},
	}
	f := newFixture(t, world, withOptions(Options{Namespace: ns}))
	expect(t, "sync", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m1:  {"update serviceexports/status demo/foo"},
	})
	exp := get(t, f.mcs[m1].MulticlusterV1beta1().ServiceExports(ns), m1, "foo")
	if c := meta.FindStatusCondition(exp.Status.Conditions, "Valid"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Protected" || !strings.Contains(c.Message, "--allow-export=demo/foo") {
		t.Errorf("Valid = %+v, want False Protected saying how to allow it", c)
	}
	for _, c := range f.mcsOf("foo").Status.Conditions {
		if c.Status != metav1.ConditionFalse || c.Reason != "Protected" || !strings.Contains(c.Message, "namespace demo is the controller's own") {
			t.Errorf("%s = %+v, want False Protected", c.Type, c)
		}
	}
	awaitEvent(t, f, "foo", "Protected")
	expect(t, "again", f.sync("demo/foo"), writes{})

	allowed := newFixture(t, world, withOptions(Options{Namespace: ns, AllowExport: []string{"demo/foo"}}))
	if w := allowed.sync("demo/foo"); len(w[m2]) == 0 {
		t.Errorf("allowed, member2 got nothing: %v", w)
	}
}

// A member bounded to other namespaces publishes nothing in this one:
// not its endpoints beside another provider's, nor a namespace of its own
// into every consumer; its export says why.
func TestExportNamespacesBound(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m3: {
			ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1"), export("foo", t0),
			service("bar", false, t0), slice("bar", "bar-3", 1, "10.3.0.2"), export("bar", t0),
		},
	}, withBounds(map[string][]string{m3: {"shop"}}))
	only1 := firstImport("foo", "imported-member1-foo-1")
	expect(t, "foo", f.sync("demo/foo"), writes{
		m1: append(slices.Clone(only1), "update serviceexports/status demo/foo"),
		m2: append([]string{"create namespaces demo"}, only1...),
		m3: append(slices.Clone(only1), "update serviceexports/status demo/foo"),
	})
	exp := get(t, f.mcs[m3].MulticlusterV1beta1().ServiceExports(ns), m3, "foo")
	want := "member3 may export only from shop (--export-namespaces): it does not provide demo's services"
	if c := meta.FindStatusCondition(exp.Status.Conditions, string(mcsv1b1.ServiceExportConditionValid)); c == nil || c.Reason != "NamespaceNotAllowed" || c.Message != want {
		t.Errorf("member3's Valid = %+v, want NamespaceNotAllowed %q", c, want)
	}
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 1 || imp.Status.Clusters[0].Cluster != m1 {
		t.Errorf("member2's import clusters %+v, want member1 only", imp.Status.Clusters)
	}
	expect(t, "bar, which only member3 exports", f.sync("demo/bar"), writes{m3: {"update serviceexports/status demo/bar"}})
}

// A member that makes the controller hold more objects than the bound
// counts as unreachable, its informers stopped, and the conditions say
// why; what it provided to others stays as it was.
func TestMemberHoldsTooMuch(t *testing.T) {
	objs := []runtime.Object{ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)}
	for i := range 10 {
		objs = append(objs, service(fmt.Sprintf("s%d", i), false, t0))
	}
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, nil, []v1alpha1.ClusterName{m2}, true)},
		m1:  objs,
		m2:  {ns1(), service("foo", false, t0), slice("foo", "foo-2", 1, "10.2.0.1")},
	}, withMaxObjects(8))
	m := f.member(m1)
	if ok, err := m.Reachable(); ok || err == nil || !strings.Contains(err.Error(), "member1 holds more than 8 objects") {
		t.Fatalf("member1 reachable %v (%v), want unreachable for holding too much", ok, err)
	}
	if m.Synced() {
		t.Error("member1's informers still count as synced")
	}
	if ok, err := f.member(m2).Reachable(); !ok {
		t.Fatalf("member2, within the bound, is unreachable: %v", err)
	}
	f.sync("demo/foo")
	c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceCollected)
	if c == nil || c.Reason != "ClusterUnreachable" || !strings.Contains(c.Message, "holds more than 8 objects") {
		t.Errorf("EndpointSliceCollected %+v, want ClusterUnreachable saying member1 holds too much", c)
	}
}

// A member's objects are bounded by what they take too: slices that
// carry the controller's label, in a namespace nobody exports, with
// thousands of endpoints the controller would have to compare, make it
// count as unreachable as too many objects do, and cost the controller no
// more. (Bulk in their labels and annotations is not held at all:
// members.TestOthersMetadataNotHeld.)
func TestMemberHoldsTooManyBytes(t *testing.T) {
	objs := []runtime.Object{ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)}
	for i := range 40 {
		junk := slice("junk", fmt.Sprintf("junk%d", i), 1)
		junk.Namespace = "junk"
		junk.Labels[discoveryv1.LabelManagedBy] = api.ManagedBy
		for range 1000 {
			noise := make([]byte, 24)
			rand.Read(noise)
			junk.Endpoints = append(junk.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.9.0.1"}, Hostname: ptr.To(hex.EncodeToString(noise))})
		}
		objs = append(objs, junk)
	}
	f := newFixture(t, world{m1: objs, m2: {ns1()}}, withMaxBytes(1<<20))
	if ok, err := f.member(m1).Reachable(); ok || err == nil || !strings.Contains(err.Error(), "member1 holds objects that take more than 1 MiB") {
		t.Fatalf("member1 reachable %v (%v), want unreachable for holding too much", ok, err)
	}
	if ok, err := f.member(m2).Reachable(); !ok {
		t.Fatalf("member2, within the bound, is unreachable: %v", err)
	}
}

// One object larger than any API server stores (a member that is not
// one, or lies) makes the member count as unreachable too, whatever the
// bound on all its objects.
func TestMemberHoldsTooLargeAnObject(t *testing.T) {
	junk := slice("junk", "junk", 1)
	junk.Namespace = "junk"
	junk.Labels[discoveryv1.LabelManagedBy] = api.ManagedBy
	noise := make([]byte, 31)
	for range 80000 {
		rand.Read(noise)
		junk.Endpoints = append(junk.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.9.0.1"}, Hostname: ptr.To(hex.EncodeToString(noise))})
	}
	f := newFixture(t, world{m1: {ns1(), junk}, m2: {ns1()}})
	if ok, err := f.member(m1).Reachable(); ok || err == nil || !strings.Contains(err.Error(), "member1 holds an object, junk/junk, that takes") {
		t.Fatalf("member1 reachable %v (%v), want unreachable for holding too large an object", ok, err)
	}
	if ok, err := f.member(m2).Reachable(); !ok {
		t.Fatalf("member2 is unreachable: %v", err)
	}
}

// A controller limited to namespaces (--watch-namespaces) holds the hub's
// and the members' namespaced objects of those only: a member whose other
// namespaces hold more than the bound stays within it, and what is
// elsewhere is not seen.
func TestWatchNamespacesHoldOnlyThose(t *testing.T) {
	objs := []runtime.Object{ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)}
	for i := range 10 {
		s := service(fmt.Sprintf("s%d", i), false, t0)
		s.Namespace = "other"
		objs = append(objs, s)
	}
	hubMCS, hubService := multiClusterService("bar", api.RemoteAndLocal, nil, nil, true), service("bar", false, t0)
	hubMCS.Namespace, hubService.Namespace = "other", "other"
	f := newFixture(t, world{hub: {hubMCS, hubService}, m1: objs, m2: {ns1()}}, withMaxObjects(8), withOptions(Options{Namespaces: []string{ns}}))
	if f.c.hub.get("other", "bar") != nil || f.c.hubServices.Get("other", "bar") != nil {
		t.Error("the hub's MultiClusterService and Service in namespace other are cached")
	}
	m := f.member(m1)
	if ok, err := m.Reachable(); !ok {
		t.Fatalf("member1, whose namespace %s is within the bound, is unreachable: %v", ns, err)
	}
	if m.Service("other", "s0") != nil {
		t.Error("member1's Service other/s0 is cached, in a namespace the controller does not sync")
	}
	expect(t, "foo", f.sync("demo/foo"), writes{
		m1: append(firstImport("foo", "imported-member1-foo-1"), "update serviceexports/status demo/foo"),
		m2: firstImport("foo", "imported-member1-foo-1"),
		m3: append([]string{"create namespaces demo"}, firstImport("foo", "imported-member1-foo-1")...),
	})
	if keys := m.ManagedKeys(); !slices.Equal(keys, []string{"demo/foo"}) {
		t.Errorf("member1's managed keys %v, want demo/foo", keys)
	}
}

// Withdrawing --allow-export removes what was imported from every
// consumer, whether the service came by a ServiceExport or a
// MultiClusterService, and deleting the MultiClusterService afterwards
// finishes with nothing left to clean.
func TestAllowExportWithdrawn(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2"), export("bar", t0)},
		m2:  {ns1()},
		m3:  {ns1()},
	}, withOptions(Options{Namespace: ns, AllowExport: []string{ns}}))
	f.sync("demo/foo")
	f.sync("demo/bar")

	f.opts.AllowExport = nil
	f.restart()
	expect(t, "foo no longer allowed", f.sync("demo/foo"), writes{hub: {"update multiclusterservices/status demo/foo"}, m2: cleaned})
	expect(t, "foo again", f.sync("demo/foo"), writes{})
	bar := []string{"delete endpointslices demo/imported-member1-bar-1", "delete services demo/derived-bar", "delete serviceimports demo/bar"}
	expect(t, "bar no longer allowed", f.sync("demo/bar"), writes{m1: append(slices.Clone(bar), "update serviceexports/status demo/bar"), m2: bar, m3: bar})
	expect(t, "bar again", f.sync("demo/bar"), writes{})

	gone := f.mcsOf("foo")
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	f.change(hub, gone, "update")
	expect(t, "foo deleted", f.sync("demo/foo"), writes{hub: {"patch multiclusterservices demo/foo"}})
}

// Narrowing --export-namespaces so that a provider may no longer export
// from the namespace removes its endpoints from every consumer: with
// another provider left, its slices; with none, the import.
func TestExportNamespacesNarrowed(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m3: {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1"), export("foo", t0)},
	})
	f.sync("demo/foo")
	f.bounds = map[string][]string{m3: {"shop"}}
	f.restart()
	slice3 := []string{"update serviceimports/status demo/foo", "delete endpointslices demo/imported-member3-foo-3"}
	// One provider left: no age to keep on the hub (ages.go).
	expect(t, "member3 narrowed", f.sync("demo/foo"), writes{
		hub: {"delete configmaps mcs-system/export-ages.demo.foo"},
		m1:  slice3, m2: slice3, m3: append(slices.Clone(slice3), "update serviceexports/status demo/foo"),
	})
	expect(t, "again", f.sync("demo/foo"), writes{})
	f.bounds = map[string][]string{m1: {"shop"}, m3: {"shop"}}
	f.restart()
	foo := []string{"delete endpointslices demo/imported-member1-foo-1", "delete services demo/derived-foo", "delete serviceimports demo/foo"}
	expect(t, "both narrowed", f.sync("demo/foo"), writes{
		m1: append(slices.Clone(foo), "update serviceexports/status demo/foo"), m2: foo, m3: foo,
	})
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// A MultiClusterService (or ServiceExport) named derived-<svc> never takes
// the controller's own derived-<svc> Services, which hold other clusters'
// endpoints, for the members' Services: with no provision list, no member
// provides it, and nothing is imported.
func TestDerivedServicesProvideNothing(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	})
	f.sync("demo/foo")
	f.change(hub, multiClusterService("derived-foo", api.RemoteAndLocal, nil, nil, true), "create")
	f.change(m2, export("derived-foo", t0), "create")
	f.sync("demo/derived-foo")
	for _, m := range memberNames {
		imp, err := f.mcs[m].MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), "derived-foo", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s imports derived-foo (%v): the controller's own derived Services taken for providers", m, imp.Status.Clusters)
		}
	}
	if c := meta.FindStatusCondition(f.exportOf(m2, "derived-foo").Status.Conditions, "Valid"); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "cannot be exported") {
		t.Errorf("member2's export of derived-foo: Valid %+v, want False, cannot be exported", c)
	}
}
