package controller

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// writes is what a sync writes, by cluster.
type writes = map[string][]string

func expect(t *testing.T, step string, got, want writes) {
	t.Helper()
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: writes (-want +got):\n%s", step, diff)
	}
}

// firstImport is what importing service name for the first time writes
// into a consumption cluster that has the namespace: the import, the
// derived Service it owns, the import's spec.ips from that Service's
// ClusterIPs, its status, and the slices.
func firstImport(name string, slices ...string) []string {
	out := []string{
		"create serviceimports demo/" + name,
		"create services demo/derived-" + name,
		"update serviceimports demo/" + name,
		"update serviceimports/status demo/" + name,
	}
	for _, s := range slices {
		out = append(out, "create endpointslices demo/"+s)
	}
	return out
}

// Story 1: foo runs in member1 only; a MultiClusterService provides it to
// member2, LocalFirst. member2 lacks the namespace and gets it (--create-namespaces).
func TestStoryOne(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.LocalFirst, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, false)},
		m1:  {service("foo", false, t0), slice("foo", "foo-abc", 1, "10.1.0.1", "10.1.0.2")},
	})
	// The finalizer first, then in the same sync everything else.
	expect(t, "first sync", f.sync("demo/foo"), writes{
		hub: {"patch multiclusterservices demo/foo", "update multiclusterservices/status demo/foo"},
		m2:  append([]string{"create namespaces demo"}, firstImport("foo", "imported-member1-foo-abc")...),
	})
	if !slices.Contains(f.mcsOf("foo").Finalizers, v1alpha1.Finalizer) {
		t.Fatalf("finalizers %v, want %s", f.mcsOf("foo").Finalizers, v1alpha1.Finalizer)
	}
	expect(t, "second sync", f.sync("demo/foo"), writes{})

	imp, derived := f.importOf(m2, "foo"), f.serviceOf(m2, "derived-foo")
	if imp.Annotations[api.AnnotationStrategy] != string(api.LocalFirst) || imp.Labels[api.LabelManagedBy] != api.ManagedBy {
		t.Errorf("ServiceImport metadata %v %v, want strategy LocalFirst and the managed-by label", imp.Labels, imp.Annotations)
	}
	if imp.Spec.Type != mcsv1b1.ClusterSetIP || len(imp.Spec.IPs) != 1 || !slices.Equal(imp.Spec.IPs, derived.Spec.ClusterIPs) {
		t.Errorf("ServiceImport spec %+v, want ClusterSetIP with the derived ClusterIPs %v", imp.Spec, derived.Spec.ClusterIPs)
	}
	if !slices.Equal(imp.Status.Clusters, []mcsv1b1.ClusterStatus{{Cluster: m1}}) {
		t.Errorf("status.clusters %v, want [member1]", imp.Status.Clusters)
	}
	if derived.Spec.Selector != nil || len(derived.OwnerReferences) != 1 || derived.OwnerReferences[0].UID != imp.UID ||
		derived.OwnerReferences[0].APIVersion != mcsv1b1.SchemeGroupVersion.String() {
		t.Errorf("derived Service selector %v owners %v, want none and the v1beta1 ServiceImport", derived.Spec.Selector, derived.OwnerReferences)
	}
	s := f.sliceOf(m2, "imported-member1-foo-abc")
	if s.Labels[mcsv1b1.LabelSourceCluster] != m1 || s.Labels["kubernetes.io/service-name"] != "derived-foo" ||
		s.Annotations[api.AnnotationSourceGeneration] != "1" || len(s.Endpoints) != 2 || s.OwnerReferences[0].UID != imp.UID {
		t.Errorf("imported slice %+v", s)
	}
	want := map[string]string{
		v1alpha1.ServiceApplied:         "True/NoHubService",
		v1alpha1.EndpointSliceCollected: "True/Collected",
		v1alpha1.EndpointSliceApplied:   "True/Applied",
	}
	if got := conds(f.mcsOf("foo").Status.Conditions); !cmp.Equal(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}

	expect(t, "a sync over what it wrote", f.sync("demo/foo"), writes{})

	// A source slice change is one slice write in the consumer.
	f.change(m1, slice("foo", "foo-abc", 2, "10.1.0.1", "10.1.0.2", "10.1.0.3"), "update")
	expect(t, "after a source change", f.sync("demo/foo"), writes{m2: {"update endpointslices demo/imported-member1-foo-abc"}})
	if s := f.sliceOf(m2, "imported-member1-foo-abc"); len(s.Endpoints) != 3 || s.Annotations[api.AnnotationSourceGeneration] != "2" {
		t.Errorf("imported slice after the change: %d endpoints, generation %s", len(s.Endpoints), s.Annotations[api.AnnotationSourceGeneration])
	}

	f.restart()
	expect(t, "after a restart", f.sync("demo/foo"), writes{})
}

// Story 2: foo runs in member1 and member2, RemoteAndLocal, every member
// consumes: each gets both clusters' slices; member2's own Service is
// left as it is.
func TestStoryTwo(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, nil, nil, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-abc", 1, "10.1.0.1")},
		m2:  {ns1(), service("foo", false, t0.Add(time.Hour)), slice("foo", "foo-xyz", 1, "10.2.0.1")},
		m3:  {ns1()},
	})
	ownVersion := f.serviceOf(m2, "foo").ResourceVersion
	both := firstImport("foo", "imported-member1-foo-abc", "imported-member2-foo-xyz")
	// Two providers: when each was first seen is kept on the hub.
	expect(t, "sync", f.sync("demo/foo"), writes{
		hub: {"create configmaps mcs-system/export-ages.demo.foo", "update multiclusterservices/status demo/foo"},
		m1:  both, m2: both, m3: both,
	})
	if own := f.serviceOf(m2, "foo"); own.Labels[api.LabelManagedBy] != "" || own.ResourceVersion != ownVersion {
		t.Errorf("member2's own Service was written: %+v", own.ObjectMeta)
	}
	if imp := f.importOf(m3, "foo"); imp.Annotations[api.AnnotationStrategy] != string(api.RemoteAndLocal) ||
		!slices.Equal(imp.Status.Clusters, []mcsv1b1.ClusterStatus{{Cluster: m1}, {Cluster: m2}}) {
		t.Errorf("member3's import %+v", imp)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})

	f.change(m1, slice("foo", "foo-abc", 2, "10.1.0.1", "10.1.0.9"), "update")
	one := []string{"update endpointslices demo/imported-member1-foo-abc"}
	expect(t, "after a source change", f.sync("demo/foo"), writes{m1: one, m2: one, m3: one})

	f.restart()
	expect(t, "after a restart", f.sync("demo/foo"), writes{})
}

func ns1() runtime.Object {
	return &corev1.Namespace{ObjectMeta: metaName(ns)}
}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }

// The MCS API flow: a ServiceExport in member1 imports serve into every
// member without native names; member3's own ServiceImport (the MCS API's
// manual import) is filled and kept; the export gets its conditions.
// Deleting the export removes what it caused and empties the user's import.
func TestServiceExportFlow(t *testing.T) {
	user := &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: ns, UID: "user-import"},
		Spec:       mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP, Ports: []mcsv1b1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	f := newFixture(t, world{
		m1: {ns1(), service("serve", false, t0), slice("serve", "serve-1", 1, "10.1.0.1"), export("serve", t0)},
		m2: {ns1()},
		m3: {ns1(), user},
	})
	all := firstImport("serve", "imported-member1-serve-1")
	expect(t, "sync", f.sync("demo/serve"), writes{
		m1: append(all, "update serviceexports/status demo/serve"),
		m2: all,
		m3: { // the user's import is filled in
			"create services demo/derived-serve",
			"update serviceimports demo/serve",
			"update serviceimports/status demo/serve",
			"create endpointslices demo/imported-member1-serve-1",
		},
	})
	for _, c := range memberNames {
		imp := f.importOf(c, "serve")
		if _, ok := imp.Annotations[api.AnnotationStrategy]; ok || len(imp.Spec.IPs) != 1 || len(imp.Spec.Ports) != 1 || imp.Spec.Ports[0].Name != "http" {
			t.Errorf("%s: ServiceImport %+v, want no strategy, the derived IP and port http", c, imp)
		}
	}
	if imp := f.importOf(m3, "serve"); imp.Labels[api.LabelManagedBy] != "" || imp.UID != "user-import" {
		t.Errorf("the user's ServiceImport became the controller's: %+v", imp.ObjectMeta)
	}
	exp := f.exportOf(m1, "serve")
	want := map[string]string{"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "False/NoConflicts"}
	if got := conds(exp.Status.Conditions); !cmp.Equal(got, want) {
		t.Errorf("ServiceExport conditions %v, want %v", got, want)
	}
	expect(t, "again", f.sync("demo/serve"), writes{})

	f.change(m1, export("serve", t0), "delete")
	gone := []string{"delete endpointslices demo/imported-member1-serve-1", "delete services demo/derived-serve", "delete serviceimports demo/serve"}
	expect(t, "after the export is deleted", f.sync("demo/serve"), writes{
		m1: gone, m2: gone,
		m3: {"delete endpointslices demo/imported-member1-serve-1", "delete services demo/derived-serve", "update serviceimports demo/serve", "update serviceimports/status demo/serve"},
	})
	if imp := f.importOf(m3, "serve"); len(imp.Spec.IPs) > 0 || len(imp.Status.Clusters) > 0 || len(imp.Spec.Ports) != 1 {
		t.Errorf("the user's ServiceImport after the export went: %+v, want its ports, no IPs, no clusters", imp)
	}
	expect(t, "again", f.sync("demo/serve"), writes{})
}

// A member serving only the MCS API's v1alpha1 gets its ServiceImport in
// that version, and its ServiceExport status too.
func TestAlphaMember(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("serve", false, t0), slice("serve", "serve-1", 1, "10.1.0.1"), export("serve", t0)},
		m2: {ns1()}, m3: {ns1()},
	}, alphaMembers(m1, m2))
	all := firstImport("serve", "imported-member1-serve-1")
	expect(t, "sync", f.sync("demo/serve"), writes{m1: append(all, "update serviceexports/status demo/serve"), m2: all, m3: all})
	for c, version := range map[string]string{m2: "multicluster.x-k8s.io/v1alpha1", m3: "multicluster.x-k8s.io/v1beta1"} {
		if owner := f.serviceOf(c, "derived-serve").OwnerReferences[0]; owner.APIVersion != version || owner.UID != f.importOf(c, "serve").UID {
			t.Errorf("%s: derived-serve's owner %+v, want the %s ServiceImport", c, owner, version)
		}
	}
	expect(t, "again", f.sync("demo/serve"), writes{})
	f.restart()
	expect(t, "after a restart", f.sync("demo/serve"), writes{})
}

// Headless services keep their type, and each endpoint's hostname.
func TestHeadless(t *testing.T) {
	src := slice("web", "web-1", 1, "10.1.0.1", "10.1.0.2")
	src.Endpoints[0].Hostname, src.Endpoints[1].Hostname = ptr.To("web-0"), ptr.To("web-1")
	f := newFixture(t, world{
		hub: {multiClusterService("web", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {service("web", true, t0), src},
		m2:  {ns1()},
	})
	expect(t, "sync", f.sync("demo/web"), writes{
		hub: {"update multiclusterservices/status demo/web"},
		// No spec.ips to fill in from a headless derived Service.
		m2: {"create serviceimports demo/web", "create services demo/derived-web", "update serviceimports/status demo/web", "create endpointslices demo/imported-member1-web-1"},
	})
	imp, derived := f.importOf(m2, "web"), f.serviceOf(m2, "derived-web")
	if imp.Spec.Type != mcsv1b1.Headless || len(imp.Spec.IPs) != 0 || derived.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("import %+v, derived clusterIP %q: want headless", imp.Spec, derived.Spec.ClusterIP)
	}
	if s := f.sliceOf(m2, "imported-member1-web-1"); ptr.Deref(s.Endpoints[1].Hostname, "") != "web-1" {
		t.Errorf("imported endpoints %+v, want the hostnames", s.Endpoints)
	}
	expect(t, "again", f.sync("demo/web"), writes{})
}

// Changing the consumption list moves the imports; deleting the
// MultiClusterService removes all it made, lets it go, and leaves the
// user's objects alone.
func TestMoveAndDelete(t *testing.T) {
	mine := slice("mine", "mine", 1, "10.13.9.9")
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
		m3:  {ns1(), service("mine", false, t0), mine},
	})
	expect(t, "sync", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  firstImport("foo", "imported-member1-foo-1"),
	})

	f.change(hub, multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m3}, true), "update")
	expect(t, "moved to member3", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  {"delete endpointslices demo/imported-member1-foo-1", "delete services demo/derived-foo", "delete serviceimports demo/foo"},
		m3:  firstImport("foo", "imported-member1-foo-1"),
	})

	gone := f.mcsOf("foo")
	gone.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	f.change(hub, gone, "update")
	expect(t, "deleted", f.sync("demo/foo"), writes{
		hub: {"patch multiclusterservices demo/foo"}, // the finalizer goes
		m3:  {"delete endpointslices demo/imported-member1-foo-1", "delete services demo/derived-foo", "delete serviceimports demo/foo"},
	})
	if fin := f.mcsOf("foo").Finalizers; len(fin) != 0 {
		t.Errorf("finalizers %v, want none", fin)
	}
	f.sliceOf(m3, "mine")
	f.serviceOf(m3, "mine")
}

// A user's derived-<svc> in the way is left alone and reported, and the
// other consumer is still served.
func TestDerivedInTheWay(t *testing.T) {
	users := service("derived-bar", false, t0)
	f := newFixture(t, world{
		hub: {multiClusterService("bar", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2, m3}, true)},
		m1:  {ns1(), service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.1")},
		m2:  {ns1(), users},
		m3:  {ns1()},
	})
	expect(t, "sync", f.syncFailing("demo/bar", "left alone, and no slices imported"), writes{
		hub: {"update multiclusterservices/status demo/bar"},
		m2:  {"create serviceimports demo/bar"},
		m3:  firstImport("bar", "imported-member1-bar-1"),
	})
	c := meta.FindStatusCondition(f.mcsOf("bar").Status.Conditions, v1alpha1.EndpointSliceApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonApplyFailed || !strings.Contains(c.Message, "member2: Service demo/derived-bar exists and is not managed by") {
		t.Errorf("EndpointSliceApplied %+v, want False naming member2's derived-bar", c)
	}
	if got := f.serviceOf(m2, "derived-bar"); got.Labels[api.LabelManagedBy] != "" || got.Spec.Selector["app"] != "derived-bar" {
		t.Errorf("the user's derived-bar was changed: %+v", got)
	}
	expect(t, "again: nothing more", f.syncFailing("demo/bar", "left alone, and no slices imported"), writes{})

	// When the user's goes, the controller's takes the name at once: its
	// deletion queues the service, however far the failing sync backed off.
	for range 10 {
		f.c.queue.AddRateLimited("demo/bar")
	}
	f.change(m2, users, "delete")
	if !queued(f.c, "demo/bar") {
		t.Fatalf("deleting the user's derived-bar did not queue demo/bar at once")
	}
	expect(t, "taken over", f.sync("demo/bar"), writes{
		m2:  {"create services demo/derived-bar", "update serviceimports demo/bar", "update serviceimports/status demo/bar", "create endpointslices demo/imported-member1-bar-1"},
		hub: {"update multiclusterservices/status demo/bar"},
	})
}

// queued reports whether key is in the queue now, not waiting out a
// back-off.
func queued(c *Controller, key string) bool {
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
		if k == key {
			return true
		}
	}
	return false
}

// A typo in the spec is reported, changes nothing already synced, and
// the last valid spec is still followed.
func TestInvalidSpec(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	})
	f.sync("demo/foo")
	f.change(hub, multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{"member22"}, true), "update")
	expect(t, "typo", f.sync("demo/foo"), writes{hub: {"update multiclusterservices/status demo/foo"}})
	for _, typ := range []string{v1alpha1.ServiceApplied, v1alpha1.EndpointSliceCollected, v1alpha1.EndpointSliceApplied} {
		c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, typ)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonInvalidSpec || !strings.Contains(c.Message, `unknown cluster "member22"`) {
			t.Errorf("%s = %+v, want False InvalidSpec naming member22", typ, c)
		}
	}
	f.sliceOf(m2, "imported-member1-foo-1") // still there
	// The last valid spec is still followed: the endpoints stay current.
	f.change(m1, slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.2"), "update")
	expect(t, "a change while invalid", f.sync("demo/foo"), writes{m2: {"update endpointslices demo/imported-member1-foo-1"}})
	awaitEvent(t, f, "foo", reasonInvalidSpec)
	// A restarted controller never saw a valid spec: it changes nothing.
	f.restart()
	f.change(m1, slice("foo", "foo-1", 3, "10.1.0.1"), "update")
	expect(t, "a change while invalid, after a restart", f.sync("demo/foo"), writes{})
	f.sliceOf(m2, "imported-member1-foo-1")
}

// Events say what changed: a new service's first True conditions record
// none (the status says so; an initial sync would write three Events per
// service), nor does a True one that only says more; a failure and the
// recovery from it do.
func TestEventsSayWhatChanged(t *testing.T) {
	valid := multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)
	f := newFixture(t, world{
		hub: {valid},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	})
	f.sync("demo/foo")
	more := f.mcsOf("foo").DeepCopy()
	more.Spec.ServiceConsumptionClusters = []v1alpha1.ClusterName{m2, m3}
	f.change(hub, more, "update")
	f.sync("demo/foo") // Applied: "imported into member2, member3"
	f.change(hub, multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{"member22"}, true), "update")
	f.sync("demo/foo")
	// Events are sent in order: once the failure's is there, the earlier
	// syncs' would be too.
	awaitEvent(t, f, "foo", reasonInvalidSpec)
	if reasons := eventReasons(t, f, "foo"); slices.Contains(reasons, reasonApplied) || slices.Contains(reasons, reasonCollected) {
		t.Errorf("Events after the first sync, a new consumer and a typo: %v, want none for True conditions that were not False", reasons)
	}
	fixed := f.mcsOf("foo").DeepCopy()
	fixed.Spec = valid.Spec
	f.change(hub, fixed, "update")
	f.sync("demo/foo")
	awaitEvent(t, f, "foo", reasonApplied)
	awaitEvent(t, f, "foo", reasonCollected)
}

func eventReasons(t *testing.T, f *fixture, name string) []string {
	t.Helper()
	list, err := f.hubKube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

// awaitEvent waits for an Event of reason on MultiClusterService name:
// events are sent apart from the status.
func awaitEvent(t *testing.T, f *fixture, name, reason string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := f.hubKube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return e.InvolvedObject.Name == name && e.Reason == reason }), nil
	})
	if err != nil {
		t.Errorf("no %s Event on %s: %v", reason, name, err)
	}
}

// Two providers disagree on a port's number: the older export wins, the
// newer one gets Conflict=True, and both clusters' endpoints are imported.
func TestPortConflict(t *testing.T) {
	newer := service("foo", false, t0.Add(time.Hour))
	newer.Spec.Ports[0].Port = 81
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1(), newer, slice("foo", "foo-2", 1, "10.2.0.1"), export("foo", t0.Add(time.Hour))},
		m3: {ns1()},
	})
	f.sync("demo/foo")
	exp := f.exportOf(m2, "foo")
	if c := meta.FindStatusCondition(exp.Status.Conditions, "Conflict"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" {
		t.Errorf("member2's Conflict condition %+v, want True PortConflict", c)
	}
	// The oldest, whose definition is used, says so too (KEP-1645).
	exp = f.exportOf(m1, "foo")
	if c := meta.FindStatusCondition(exp.Status.Conditions, "Conflict"); c == nil || c.Status != metav1.ConditionTrue || c.Reason != "PortConflict" || !strings.Contains(c.Message, "member2's") {
		t.Errorf("member1's Conflict condition %+v, want True PortConflict naming member2", c)
	}
	imp := f.importOf(m3, "foo")
	if len(imp.Spec.Ports) != 1 || imp.Spec.Ports[0].Port != 80 || len(imp.Status.Clusters) != 2 {
		t.Errorf("import %+v, want member1's port 80 and both clusters", imp)
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// The MCS API conformance suite's asymmetric ports (KEP-1645): member1
// exports 42/TCP and 42/UDP, member2 later 42/TCP and 142/SCTP. The
// import has the union, and both exports say Conflict=True PortConflict,
// each naming the ports its own Service lacks; once the Services agree,
// both say NoConflicts and the import has their ports again.
func TestAsymmetricPortsConflict(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), withPorts(service("foo", false, t0), "tcp/42/TCP", "udp/42/UDP"), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()}, m3: {ns1()},
	})
	f.sync("demo/foo")
	later := withPorts(service("foo", false, t0.Add(time.Hour)), "tcp/42/TCP", "stcp/142/SCTP")
	f.change(m2, later, "create")
	f.change(m2, export("foo", t0.Add(time.Hour)), "create")
	// Every consumer's derived Service and import get the union; both
	// exports' status changes, member1's too, though it lost nothing.
	union := []string{"update services demo/derived-foo", "update serviceimports demo/foo", "update serviceimports/status demo/foo"}
	expect(t, "member2 exports", f.sync("demo/foo"), writes{
		hub: {"create configmaps mcs-system/export-ages.demo.foo"},
		m1:  append(slices.Clone(union), "update serviceexports/status demo/foo"),
		m2:  append(slices.Clone(union), "update serviceexports/status demo/foo"),
		m3:  union,
	})
	expectPorts(t, f, "tcp/42/TCP", "udp/42/UDP", "stcp/142/SCTP")
	expectConflict(t, f, m1, "True/PortConflict", "member1's Service lacks the port(s) 142/SCTP")
	expectConflict(t, f, m2, "True/PortConflict", "member2's Service lacks the port(s) 42/UDP")
	expect(t, "again", f.sync("demo/foo"), writes{})

	f.change(m2, withPorts(later, "tcp/42/TCP", "udp/42/UDP"), "update")
	f.sync("demo/foo")
	expectPorts(t, f, "tcp/42/TCP", "udp/42/UDP")
	expectConflict(t, f, m1, "False/NoConflicts", "")
	expectConflict(t, f, m2, "False/NoConflicts", "")
}

// The conformance suite's "same port name but different port numbers on
// each cluster": member1's hello has tcp 42/TCP and udp 42/UDP, member2's,
// exported a second later, tcp 4242/TCP with target port 42. The import's
// "tcp" is member1's 42; member2's slice names its target port 42 "tcp"
// just as member1's does, so kube-proxy would send the clusterset IP's
// port 42 to member2's pods unless its imported slice drops that port. It
// keeps its endpoints, without ports, and gets the port back once member2
// defines "tcp" as the import does.
func TestSamePortNameOtherNumber(t *testing.T) {
	hello1 := withPorts(service("hello", false, t0), "tcp/42/TCP", "udp/42/UDP")
	hello2 := withPorts(service("hello", false, t0.Add(time.Second)), "tcp/4242/TCP")
	f := newFixture(t, world{
		m1: {ns1(), hello1, withSlicePorts(slice("hello", "hello-1", 1, "10.1.0.1"), "tcp/42/TCP", "udp/42/UDP"), export("hello", t0)},
		m2: {ns1(), hello2, withSlicePorts(slice("hello", "hello-2", 1, "10.2.0.1"), "tcp/42/TCP"), export("hello", t0.Add(time.Second))},
	})
	f.sync("demo/hello")
	expectImportPorts(t, f, m1, "hello", "tcp/42/TCP", "udp/42/UDP")
	for _, c := range []string{m1, m2} {
		if got := conds(f.exportOf(c, "hello").Status.Conditions)["Conflict"]; got != "True/PortConflict" {
			t.Errorf("%s's Conflict condition %s, want True/PortConflict", c, got)
		}
	}
	for _, c := range []string{m1, m2} {
		expectSlicePorts(t, f, c, "imported-member1-hello-1", "tcp/42/TCP", "udp/42/UDP")
		expectSlicePorts(t, f, c, "imported-member2-hello-2")
		if got := f.sliceOf(c, "imported-member2-hello-2").Endpoints; len(got) != 1 || got[0].Addresses[0] != "10.2.0.1" {
			t.Errorf("%s: member2's imported endpoints %+v, want 10.2.0.1 kept", c, got)
		}
	}
	expect(t, "again", f.sync("demo/hello"), writes{})

	// member2 defines "tcp" as member1 does: no conflict, and its
	// endpoints get the port back, one slice update per consumer.
	f.change(m2, withPorts(hello2, "tcp/42/TCP"), "update")
	got := f.sync("demo/hello")
	for _, c := range []string{m1, m2} {
		if !slices.Contains(got[c], "update endpointslices demo/imported-member2-hello-2") || slices.Contains(got[c], "update endpointslices demo/imported-member1-hello-1") {
			t.Errorf("%s: writes %v, want member2's imported slice updated and member1's left alone", c, got[c])
		}
		expectSlicePorts(t, f, c, "imported-member2-hello-2", "tcp/42/TCP")
	}
	expect(t, "again, without the conflict", f.sync("demo/hello"), writes{})
}

// The suite's "different port name on each cluster": member2's tcp2
// 4242/TCP (target port 42) joins the union, so its slice keeps "tcp2".
func TestOtherPortNameOtherNumber(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), withPorts(service("hello", false, t0), "tcp/42/TCP", "udp/42/UDP"), withSlicePorts(slice("hello", "hello-1", 1, "10.1.0.1"), "tcp/42/TCP", "udp/42/UDP"), export("hello", t0)},
		m2: {ns1(), withPorts(service("hello", false, t0.Add(time.Second)), "tcp2/4242/TCP"), withSlicePorts(slice("hello", "hello-2", 1, "10.2.0.1"), "tcp2/42/TCP"), export("hello", t0.Add(time.Second))},
	})
	f.sync("demo/hello")
	expectImportPorts(t, f, m1, "hello", "tcp/42/TCP", "udp/42/UDP", "tcp2/4242/TCP")
	for _, c := range []string{m1, m2} {
		expectSlicePorts(t, f, c, "imported-member1-hello-1", "tcp/42/TCP", "udp/42/UDP")
		expectSlicePorts(t, f, c, "imported-member2-hello-2", "tcp2/42/TCP")
	}
	expect(t, "again", f.sync("demo/hello"), writes{})
}

// withSlicePorts gives s the ports "name/number/protocol".
func withSlicePorts(s *discoveryv1.EndpointSlice, ports ...string) *discoveryv1.EndpointSlice {
	s = s.DeepCopy()
	s.Ports = nil
	for _, p := range ports {
		name, rest, _ := strings.Cut(p, "/")
		number, protocol, _ := strings.Cut(rest, "/")
		n, _ := strconv.Atoi(number)
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(int32(n)), Protocol: ptr.To(corev1.Protocol(protocol))})
	}
	return s
}

// expectSlicePorts checks the ports "name/number/protocol" of cluster's slice, in order.
func expectSlicePorts(t *testing.T, f *fixture, cluster, slice string, want ...string) {
	t.Helper()
	var got []string
	for _, p := range f.sliceOf(cluster, slice).Ports {
		got = append(got, fmt.Sprintf("%s/%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: %s ports %v, want %v", cluster, slice, got, want)
	}
}

// expectImportPorts checks the ports "name/number/protocol" of cluster's import of svc, in order.
func expectImportPorts(t *testing.T, f *fixture, cluster, svc string, want ...string) {
	t.Helper()
	var got []string
	for _, p := range f.importOf(cluster, svc).Spec.Ports {
		got = append(got, fmt.Sprintf("%s/%d/%s", p.Name, p.Port, p.Protocol))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: import ports %v, want %v", cluster, got, want)
	}
}

// withPorts gives s the ports "name/number/protocol".
func withPorts(s *corev1.Service, ports ...string) *corev1.Service {
	s = s.DeepCopy()
	s.Spec.Ports = nil
	for _, p := range ports {
		name, rest, _ := strings.Cut(p, "/")
		number, protocol, _ := strings.Cut(rest, "/")
		n, _ := strconv.Atoi(number)
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Port: int32(n), Protocol: corev1.Protocol(protocol)})
	}
	return s
}

// expectPorts checks member3's import has the ports "name/number/protocol", in order.
func expectPorts(t *testing.T, f *fixture, want ...string) {
	t.Helper()
	expectImportPorts(t, f, m3, "foo", want...)
}

// expectConflict checks the Conflict condition of cluster's export:
// status/reason, and a message that says msg.
func expectConflict(t *testing.T, f *fixture, cluster, want, msg string) {
	t.Helper()
	c := meta.FindStatusCondition(f.exportOf(cluster, "foo").Status.Conditions, "Conflict")
	if c == nil || string(c.Status)+"/"+c.Reason != want || !strings.Contains(c.Message, msg) {
		t.Errorf("%s's Conflict condition %+v, want %s saying %q", cluster, c, want, msg)
	}
}

// The hub's Service is propagated to provision and consumption clusters,
// never over a member's own Service, and follows the hub's changes.
func TestHubServicePropagated(t *testing.T) {
	hubSvc := service("foo", false, t0)
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true), hubSvc},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	})
	expect(t, "sync", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  append([]string{"create services demo/foo"}, firstImport("foo", "imported-member1-foo-1")...),
	})
	if got := f.serviceOf(m2, "foo"); got.Labels[api.LabelManagedBy] != api.ManagedBy || got.Spec.Selector["app"] != "foo" {
		t.Errorf("propagated Service %+v", got)
	}
	if c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.ServiceApplied); c == nil || c.Reason != reasonApplied {
		t.Errorf("ServiceApplied %+v, want Applied", c)
	}
	changed := hubSvc.DeepCopy()
	changed.Spec.Ports[0].Port = 8080
	changed.ResourceVersion = ""
	if err := f.hubKube.Tracker().Update(corev1.SchemeGroupVersion.WithResource("services"), changed, ns); err != nil {
		t.Fatal(err)
	}
	awaitHubService(t, f, 8080)
	expect(t, "after the hub's change", f.sync("demo/foo"), writes{m2: {"update services demo/foo"}})
	if got := f.serviceOf(m2, "foo").Spec.Ports[0].Port; got != 8080 {
		t.Errorf("propagated port %d, want 8080", got)
	}
}

func awaitHubService(t *testing.T, f *fixture, port int32) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		s, ok := members.Unpacked(f.c.hubServices.Get("demo", "foo")).(*corev1.Service)
		return ok && s.Spec.Ports[0].Port == port, nil
	})
	if err != nil {
		t.Fatal("the hub's Service change never reached the cache")
	}
}

// A consumer that cannot be reached is named in the conditions and not
// written to; its imports stay; it is synced when it answers again.
func TestUnreachableConsumer(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2, m3}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()}, m3: {ns1()},
	})
	f.sync("demo/foo")
	f.setDown(m3, true)
	f.change(m1, slice("foo", "foo-1", 2, "10.1.0.1", "10.1.0.2"), "update")
	expect(t, "member3 down", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  {"update endpointslices demo/imported-member1-foo-1"},
	})
	c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceApplied)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonClusterUnreachable || !strings.Contains(c.Message, "member3 is unreachable") {
		t.Errorf("EndpointSliceApplied %+v, want False ClusterUnreachable naming member3", c)
	}
	f.setDown(m3, false)
	expect(t, "member3 back", f.sync("demo/foo"), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m3:  {"update endpointslices demo/imported-member1-foo-1"},
	})
}

// A hub without the MultiClusterService CRD still syncs ServiceExports,
// and picks MultiClusterServices up once the CRD is installed, without a
// restart.
func TestHubWithoutCRD(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("serve", false, t0), slice("serve", "serve-1", 1, "10.1.0.1"), export("serve", t0)},
		m2: {ns1()}, m3: {ns1()},
	}, withoutCRD())
	if err := f.c.Synced(); err != nil {
		t.Errorf("Synced() = %v, want ready: the ServiceExport path works", err)
	}
	all := firstImport("serve", "imported-member1-serve-1")
	expect(t, "exports without the CRD", f.sync("demo/serve"), writes{m1: append(all, "update serviceexports/status demo/serve"), m2: all, m3: all})

	if _, err := f.hubMCS.McsV1alpha1().MultiClusterServices(ns).Create(t.Context(),
		multiClusterService("serve", api.LocalFirst, nil, []v1alpha1.ClusterName{m2}, true), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.serveCRD()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.c.hub.get(ns, "serve") != nil, nil
	})
	if err != nil {
		t.Fatal("the MultiClusterService was never seen after the CRD appeared")
	}
	if !queued(f.c, "demo/serve") {
		t.Error("the CRD's arrival did not queue the services")
	}
	gone := []string{"delete endpointslices demo/imported-member1-serve-1", "delete services demo/derived-serve", "delete serviceimports demo/serve"}
	expect(t, "once the CRD is served", f.sync("demo/serve"), writes{
		hub: {"update multiclusterservices/status demo/serve"},
		m1:  append(gone, "update serviceexports/status demo/serve"),
		m2:  {"update serviceimports demo/serve", "update serviceimports/status demo/serve"}, // the strategy annotation, and Ready observing it
		m3:  gone,
	})
}

// Many failures make one condition that names the first few and counts
// the rest: a status past the API's bound would be refused.
func TestManyFailuresSummarised(t *testing.T) {
	var src, users []runtime.Object
	for i := range 30 {
		src = append(src, slice("foo", fmt.Sprintf("foo-%d", i), 1, fmt.Sprintf("10.1.0.%d", i)))
		user := slice("other", fmt.Sprintf("imported-member1-foo-%d", i), 1, "10.9.9.9")
		users = append(users, user)
	}
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  append([]runtime.Object{ns1(), service("foo", false, t0)}, src...),
		m2:  append([]runtime.Object{ns1()}, users...),
	})
	f.syncFailing("demo/foo", "imported-member1-foo-0 exists and is not managed")
	c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceApplied)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.HasSuffix(c.Message, "; and 25 more") || strings.Count(c.Message, "is not managed by") != 5 {
		t.Errorf("EndpointSliceApplied %+v, want the first 5 slices in the way and 25 more", c)
	}
}

func TestBounded(t *testing.T) {
	long := strings.Repeat("é", maxMessage) // two bytes each
	got := bounded(long)
	if len(got) > maxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("bounded: %d bytes, valid UTF-8 %v", len(got), utf8.ValidString(got))
	}
	if bounded("short") != "short" {
		t.Error("a short message was changed")
	}
}

// A Service name of 56 to 63 characters is legal, but derived-<name> would
// not be: its ServiceExport is told why, and nothing is imported.
func TestNameTooLongToExport(t *testing.T) {
	long := strings.Repeat("a", 60)
	f := newFixture(t, world{
		m1: {ns1(), service(long, false, t0), slice(long, long+"-1", 1, "10.1.0.1"), export(long, t0)},
		m2: {ns1()},
	})
	expect(t, "sync", f.sync("demo/"+long), writes{m1: {"update serviceexports/status demo/" + long}})
	exp := f.exportOf(m1, long)
	c := meta.FindStatusCondition(exp.Status.Conditions, "Valid")
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "InvalidServiceName" || !strings.Contains(c.Message, "at most 55 characters") {
		t.Errorf("Valid = %+v, want False InvalidServiceName saying at most 55 characters", c)
	}
	expect(t, "again", f.sync("demo/"+long), writes{})
}

// When the API server refuses derived-<svc>, the ServiceImport and the
// slices are kept current all the same, and the condition says why.
func TestDerivedRefused(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	})
	f.kube[m2].PrependReactor("create", "services", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), "derived-foo", nil)
	})
	expect(t, "sync", f.syncFailing("demo/foo", `Service "derived-foo" is invalid`), writes{
		hub: {"update multiclusterservices/status demo/foo"},
		m2:  {"create serviceimports demo/foo", "update serviceimports/status demo/foo", "create endpointslices demo/imported-member1-foo-1"},
	})
	c := meta.FindStatusCondition(f.mcsOf("foo").Status.Conditions, v1alpha1.EndpointSliceApplied)
	if c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, `member2: create Service demo/…: Service "derived-foo" is invalid`) {
		t.Errorf("EndpointSliceApplied %+v, want False naming member2's refused derived-foo", c)
	}
	if imp := f.importOf(m2, "foo"); len(imp.Spec.IPs) != 0 || len(imp.Status.Clusters) != 1 {
		t.Errorf("import %+v, want no IPs and member1 as its cluster", imp)
	}
}

// A user's Service named derived-bar beside bar: bar's import is reported
// and left alone in that cluster, derived-bar is exported as a service of
// its own, and a change to it queues both.
func TestServiceNamedDerived(t *testing.T) {
	users := service("derived-bar", false, t0)
	f := newFixture(t, world{
		m1: {ns1(), service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.1"), export("bar", t0)},
		m2: {ns1(), users, slice("derived-bar", "derived-bar-1", 1, "10.2.0.1"), export("derived-bar", t0)},
		m3: {ns1()},
	})
	f.syncFailing("demo/bar", "left alone, and no slices imported")
	f.sync("demo/derived-bar")
	if got := f.sliceOf(m3, "imported-member2-derived-bar-1"); got.Labels["kubernetes.io/service-name"] != "derived-derived-bar" {
		t.Errorf("derived-bar's slice in member3 is for %s", got.Labels["kubernetes.io/service-name"])
	}
	if got := f.serviceOf(m2, "derived-bar"); got.Labels[api.LabelManagedBy] != "" || got.Spec.Selector["app"] != "derived-bar" {
		t.Errorf("the user's derived-bar was changed: %+v", got)
	}
	expect(t, "bar again", f.syncFailing("demo/bar", "left alone, and no slices imported"), writes{})
	expect(t, "derived-bar again", f.sync("demo/derived-bar"), writes{})
	queued(f.c, "") // empty the queue
	changed := users.DeepCopy()
	changed.Spec.Ports[0].Port = 81
	f.change(m2, changed, "update")
	// The informer calls its handlers after its cache has the change.
	var keys []string
	want := []string{"demo/bar", "demo/derived-bar"}
	_ = wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		for f.c.queue.Len() > 0 {
			k, _ := f.c.queue.Get()
			f.c.queue.Done(k)
			keys = append(keys, k)
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		return slices.Equal(keys, want), nil
	})
	if !slices.Equal(keys, want) {
		t.Errorf("a change to the user's derived-bar queued %v, want %v", keys, want)
	}
}

// A member joining a fleet changes no MultiClusterService's conditions
// when its spec names no consumption clusters: a join writes no hub
// status, where it would rewrite every service's. One the spec names
// says so.
func TestJoinChangesNoConditions(t *testing.T) {
	plan := func(consumers ...string) *desired.Plan {
		return &desired.Plan{Provision: []string{m1}, Consumption: consumers, Import: &desired.Import{Clusters: []string{m1}}}
	}
	every := multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, nil, true)
	before, after := conditions(every, plan(m1, m2), &outcome{}), conditions(every, plan(m1, m2, m3), &outcome{})
	if diff := cmp.Diff(before, after); diff != "" {
		t.Errorf("conditions before and after member3 joined (-before +after):\n%s", diff)
	}
	if c := meta.FindStatusCondition(after, v1alpha1.EndpointSliceApplied); c == nil || c.Message != "imported into every member" {
		t.Errorf("EndpointSliceApplied %+v, want True, imported into every member", c)
	}
	named := multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2, m3}, true)
	if c := meta.FindStatusCondition(conditions(named, plan(m2, m3), &outcome{}), v1alpha1.EndpointSliceApplied); c == nil || c.Message != "imported into member2, member3" {
		t.Errorf("EndpointSliceApplied %+v, want True, imported into member2, member3", c)
	}
}
