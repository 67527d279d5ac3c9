package controller

import (
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// ordered is foo from member1 and member3 to member2, LocalFirst with the
// failover order given.
func ordered(order ...v1alpha1.ClusterName) *v1alpha1.MultiClusterService {
	m := multiClusterService("foo", api.LocalFirst, []v1alpha1.ClusterName{m1, m3}, []v1alpha1.ClusterName{m2}, true)
	if order != nil {
		m.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{FailoverOrder: order}
	}
	return m
}

func orderedWorld(order ...v1alpha1.ClusterName) world {
	return world{
		hub: {ordered(order...)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
		m3:  {ns1(), service("foo", false, t0), slice("foo", "foo-3", 1, "10.3.0.1")},
	}
}

var (
	provider1, provider3 = api.ProviderService("foo", m1), api.ProviderService("foo", m3)
	copy1, copy3         = api.ProviderSlicePrefix + "imported-member1-foo-1", api.ProviderSlicePrefix + "imported-member3-foo-3"
)

// providerVIPs is the provider-vips annotation member2's import should
// carry for the providers given, in that order.
func providerVIPs(f *fixture, providers ...string) string {
	ips := map[string][]string{}
	for _, c := range providers {
		ips[c] = f.serviceOf(m2, api.ProviderService("foo", c)).Spec.ClusterIPs
	}
	return api.FormatProviderVIPs(providers, ips)
}

// A failover order gives every consumer a Service per ordered provider,
// routed by copies of that provider's slices alone; an unchanged world
// writes nothing more.
func TestProviderServicesMade(t *testing.T) {
	f := newFixture(t, orderedWorld(m3, m1))
	got := f.sync("demo/foo")
	expect(t, "first sync", writes{m2: got[m2]}, writes{m2: {
		"create serviceimports demo/foo", "create services demo/derived-foo",
		"create services demo/" + provider3, "create services demo/" + provider1,
		"update serviceimports demo/foo", "update serviceimports/status demo/foo",
		"create endpointslices demo/imported-member1-foo-1", "create endpointslices demo/imported-member3-foo-3",
		"create endpointslices demo/" + copy1, "create endpointslices demo/" + copy3,
	}})
	expect(t, "second sync", f.sync("demo/foo"), writes{})

	imp := f.importOf(m2, "foo")
	if got, want := imp.Annotations[api.AnnotationProviderVIPs], providerVIPs(f, m3, m1); got != want || !strings.HasPrefix(got, m3+"=10.") {
		t.Errorf("import's provider VIPs %q, want %q", got, want)
	}
	for c, name := range map[string]string{m1: provider1, m3: provider3} {
		s := f.serviceOf(m2, name)
		if s.Labels[mcsv1b1.LabelServiceName] != "foo" || s.Labels[mcsv1b1.LabelSourceCluster] != c || s.Labels[api.LabelManagedBy] != api.ManagedBy ||
			s.Spec.Selector != nil || len(s.Spec.ClusterIPs) != 1 || len(s.OwnerReferences) != 1 || s.OwnerReferences[0].UID != imp.UID ||
			len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 80 {
			t.Errorf("provider Service of %s: %+v", c, s)
		}
	}
	for c, name := range map[string]string{m1: copy1, m3: copy3} {
		s := f.sliceOf(m2, name)
		if s.Labels[discoveryv1.LabelServiceName] != api.ProviderService("foo", c) || s.Labels[mcsv1b1.LabelSourceCluster] != c ||
			len(s.Endpoints) != 1 || s.OwnerReferences[0].UID != imp.UID {
			t.Errorf("copy of %s's slice: %+v", c, s)
		}
	}
	if s := f.sliceOf(m2, "imported-member1-foo-1"); s.Labels[discoveryv1.LabelServiceName] != "derived-foo" {
		t.Errorf("imported slice joined to %q, want derived-foo", s.Labels[discoveryv1.LabelServiceName])
	}
}

// Without an order, nothing more than before is written.
func TestNoOrderNoProviderServices(t *testing.T) {
	f := newFixture(t, orderedWorld())
	got := f.sync("demo/foo")
	expect(t, "first sync", writes{m2: got[m2]}, writes{m2: firstImport("foo", "imported-member1-foo-1", "imported-member3-foo-3")})
}

// A provider Service someone deletes or edits is made right by the sync
// that change queues.
func TestProviderServicesHeal(t *testing.T) {
	f := newFixture(t, orderedWorld(m3, m1))
	f.sync("demo/foo")
	queued(f.c, "")

	f.change(m2, f.serviceOf(m2, provider3), "delete")
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatalf("deleted: demo/foo not queued")
	}
	// Made anew, with a new VIP for the import to carry.
	expect(t, "deleted", f.sync("demo/foo"), writes{m2: {
		"create services demo/" + provider3, "update serviceimports demo/foo", "update serviceimports/status demo/foo",
	}})
	queued(f.c, "")

	edited := f.serviceOf(m2, provider1)
	edited.Spec.Ports[0].Port = 81
	f.change(m2, edited, "update")
	if !awaitQueued(t, f.c, "demo/foo") {
		t.Fatalf("edited: demo/foo not queued")
	}
	expect(t, "edited", f.sync("demo/foo"), writes{m2: {"update services demo/" + provider1}})
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// A provider Service goes with its provider, with the order, and with the
// import.
func TestProviderServicesGo(t *testing.T) {
	f := newFixture(t, orderedWorld(m3, m1))
	f.sync("demo/foo")

	f.change(m1, f.serviceOf(m1, "foo"), "delete")
	got := f.sync("demo/foo")
	expect(t, "provider left", writes{m2: got[m2]}, writes{m2: {
		"delete services demo/" + provider1,
		"update serviceimports demo/foo", "update serviceimports/status demo/foo",
		"delete endpointslices demo/imported-member1-foo-1", "delete endpointslices demo/" + copy1,
	}})

	m := f.mcsOf("foo")
	m.Spec.LocalFirst = nil
	f.change(hub, m, "update")
	got = f.sync("demo/foo")
	expect(t, "order gone", writes{m2: got[m2]}, writes{m2: {
		"delete services demo/" + provider3,
		"update serviceimports demo/foo", "update serviceimports/status demo/foo",
		"delete endpointslices demo/" + copy3,
	}})

	m = f.mcsOf("foo")
	m.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{FailoverOrder: []v1alpha1.ClusterName{m3}}
	f.change(hub, m, "update")
	f.sync("demo/foo")
	f.change(hub, f.mcsOf("foo"), "delete")
	got = f.sync("demo/foo")
	expect(t, "import gone", writes{m2: got[m2]}, writes{m2: {
		"delete endpointslices demo/imported-member3-foo-3", "delete endpointslices demo/" + copy3,
		"delete services demo/" + provider3, "delete services demo/derived-foo", "delete serviceimports demo/foo",
	}})
}
