package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/internal/hostilemember"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The controller against a hostile member (controller/internal/hostilemember):
// member1 is a TLS API server that its Secret on the hub registers, as
// `kubectl mcs join` registers one, reached through the clients and
// bounds mcs-controller runs with, and probed at /readyz; member2 and
// member3, its consumers, are fakes whose writes the tests read.

// hostileProvider registers member1 by hostileSecret, served by h, and
// member2 and member3 as fakes.
func hostileProvider(h *hostilemember.Member) option {
	return func(f *fixture) {
		f.registration = func(o *members.Options) {
			o.Members = slices.DeleteFunc(o.Members, func(m *members.Member) bool { return m.Name == h.Name })
			o.Hub, o.Namespace, o.QPS, o.Burst = f.hubKube, controllerNamespace, 1000, 1000
			o.Ready = func(ctx context.Context, m *members.Member) error {
				if m.Name == h.Name {
					return members.Readyz(ctx, m)
				}
				return f.ready(ctx, m)
			}
		}
	}
}

// hostileSecret is the hub's Secret of the member h serves.
func hostileSecret(h *hostilemember.Member) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: h.Name, Namespace: controllerNamespace, Labels: map[string]string{api.LabelCluster: h.Name}},
		Data:       map[string][]byte{api.KeyKubeconfig: []byte(h.Kubeconfig())},
	}
}

// exportStatus is the Valid condition the controller last wrote of the
// hostile member's export of namespace/name; nil when it wrote none.
func exportStatus(h *hostilemember.Member, namespace, name string) *metav1.Condition {
	var status mcsv1b1.ServiceExportStatus
	if !h.Status("serviceexports", namespace, name, &status) {
		return nil
	}
	return meta.FindStatusCondition(status.Conditions, string(mcsv1b1.ServiceExportConditionValid))
}

// importedEndpoints are the endpoints of every slice the controller
// imported into cluster from member1, by service.
func (f *fixture) importedEndpoints(cluster string) map[string]int {
	f.t.Helper()
	list, err := f.kube[cluster].DiscoveryV1().EndpointSlices(ns).List(f.t.Context(), metav1.ListOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	out := map[string]int{}
	for _, s := range list.Items {
		if s.Labels[mcsv1b1.LabelSourceCluster] == m1 {
			out[s.Labels[mcsv1b1.LabelServiceName]] += len(s.Endpoints)
		}
	}
	return out
}

// A provider whose API server serves ten times its endpoint budget
// (--member-max-endpoints, here 2,000 for speed: 40 exports of 500
// endpoints each) imports at most the budget into each consumer: its
// oldest exports, whole; the newest are left out with
// Valid=False/TooManyEndpoints, and syncing them all again changes
// nothing in any consumer. Its oldest export, of a Service with 17 ports
// (--max-imported-ports: 16, the default), is refused TooManyPorts and
// costs no budget. The heap the controller holds once it has registered
// the member and synced every export grows by at most hostileBudgetHeld,
// and at its peak by at most hostileBudgetPeak.
func TestHostileProviderEndpointBudget(t *testing.T) {
	if !hostilemember.Alone(t) {
		return
	}
	const (
		exports, perExport, perSlice = 40, 500, 100
		budget                       = 2000
		fit                          = budget / perExport
		// hostileBudgetHeld bounds the heap the controller holds once it
		// synced every export: the caches of the member's 20,000 endpoints,
		// and of the budget's 2,000 imported into three consumers (and what
		// the fixture's fakes hold of those): 3.0-3.3 MiB measured under
		// the race detector, where importing all 20,000 held 14.5 MiB.
		hostileBudgetHeld = 8 << 20
		// hostileBudgetPeak bounds the heap at its peak, garbage not yet
		// collected included, which grows with what the process held
		// before: 18-24 MiB measured alone, up to 48 MiB after other tests.
		hostileBudgetPeak = 96 << 20
	)
	h := hostilemember.New(t, m1, nil)
	h.Serve("namespaces", ns1())
	name := func(i int) string { return fmt.Sprintf("svc-%02d", i) }
	ports := make([]string, 17)
	for i := range ports {
		ports[i] = fmt.Sprintf("p%d/%d/TCP", i, 1000+i)
	}
	wide := withPorts(service("wide", false, t0), ports...)
	h.Serve("services", wide)
	h.Serve("endpointslices", hostileSlices("wide", 0, perExport, perSlice)...)
	h.Serve("serviceexports", export("wide", t0))
	for i := range exports {
		h.Serve("services", service(name(i), false, t0))
		h.Serve("endpointslices", hostileSlices(name(i), i+1, perExport, perSlice)...)
		h.Serve("serviceexports", export(name(i), t0.Add(time.Duration(i+1)*time.Hour)))
	}

	before := hostilemember.LiveHeap()
	peak := hostilemember.PeakHeap()
	f := newFixture(t, world{hub: {hostileSecret(h)}, m2: {ns1()}, m3: {ns1()}},
		// A fake clock: a write slower than memberWait on a loaded machine
		// would leave its member slow, and the export's status unwritten
		// until a worker synced the service again; this fixture has none.
		hostileProvider(h), withOptions(Options{Clock: clocktesting.NewFakeClock(t0), MemberMaxEndpoints: budget, MaxImportedEndpoints: 10000, MaxImportedPorts: 16}))
	if !f.member(m1).Synced() {
		t.Fatalf("the hostile member has not synced: %v", f.member(m1).Err())
	}
	keys := []string{"demo/wide"}
	for i := range exports {
		keys = append(keys, "demo/"+name(i))
	}
	// Newest first: what a sync reads ranks every export the caches hold.
	for _, k := range slices.Backward(keys) {
		f.sync(k)
	}
	used := peak()
	held := int64(hostilemember.LiveHeap()) - int64(before)
	t.Logf("heap held: %.1f MiB (bound %d MiB); at its peak: %.1f MiB (bound %d MiB)", float64(held)/(1<<20), hostileBudgetHeld>>20, float64(used)/(1<<20), hostileBudgetPeak>>20)
	if held > hostileBudgetHeld || used > hostileBudgetPeak {
		t.Errorf("the hostile provider grew the heap held by %.1f MiB and its peak by %.1f MiB, want at most %d and %d MiB", float64(held)/(1<<20), float64(used)/(1<<20), hostileBudgetHeld>>20, hostileBudgetPeak>>20)
	}

	for _, c := range []string{m2, m3} {
		got := f.importedEndpoints(c)
		total := 0
		for svc, n := range got {
			total += n
			if i := slices.Index(keys, "demo/"+svc) - 1; i < 0 || i >= fit || n != perExport {
				t.Errorf("%s imports %d endpoints of %s, want the %d oldest exports of 500 each alone", c, n, svc, fit)
			}
		}
		if total > budget || len(got) != fit {
			t.Errorf("%s imports %d endpoints of %d services from the hostile member, want %d of %d: the budget", c, total, len(got), budget, fit)
		}
	}
	if c := exportStatus(h, ns, "wide"); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "TooManyPorts" || !strings.Contains(c.Message, "--max-imported-ports") {
		t.Errorf("wide's Valid condition %+v, want False TooManyPorts naming --max-imported-ports", c)
	}
	for i := range exports {
		c := exportStatus(h, ns, name(i))
		switch {
		case i < fit && (c == nil || c.Status != metav1.ConditionTrue):
			t.Errorf("%s, within the budget: Valid %+v, want True", name(i), c)
		case i >= fit && (c == nil || c.Status != metav1.ConditionFalse || c.Reason != "TooManyEndpoints" || !strings.Contains(c.Message, "--member-max-endpoints")):
			t.Errorf("%s, past the budget: Valid %+v, want False TooManyEndpoints naming --member-max-endpoints", name(i), c)
		}
	}
	// The older exports' imports are left as they are.
	for _, k := range keys {
		got := f.sync(k)
		if len(got[m2])+len(got[m3]) > 0 {
			t.Errorf("sync %s again wrote into the consumers: %v", k, got)
		}
	}
}

// hostileSlices are n endpoints of svc, 10.<octet>.x.y on, in slices of
// perSlice.
func hostileSlices(svc string, octet, n, perSlice int) []any {
	var out []any
	for first := 0; first < n; first += perSlice {
		s := slice(svc, fmt.Sprintf("%s-%d", svc, first/perSlice), 1)
		for i := first; i < min(n, first+perSlice); i++ {
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", octet, i/250, i%250+1)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		out = append(out, s)
	}
	return out
}

// awaitHostile waits until cond holds, polling: for long, as the race
// detector makes decoding what a hostile member sends slow.
func awaitHostile(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatal(what)
	}
}

// bulkyExport is a tenant's ServiceExport namespace/name whose
// exportedAnnotations and exportedLabels take about 1.4 MB (the API
// server takes requests of up to 1.5 MiB), random, as nothing
// compresses them.
func bulkyExport(t *testing.T, namespace, name string, created time.Time) *mcsv1b1.ServiceExport {
	t.Helper()
	e := export(name, created)
	e.Namespace = namespace
	e.Spec.ExportedAnnotations, e.Spec.ExportedLabels = map[string]string{}, map[string]string{}
	for k := range 21 {
		random := make([]byte, 48<<10)
		if _, err := rand.Read(random); err != nil {
			t.Fatal(err)
		}
		e.Spec.ExportedAnnotations[fmt.Sprintf("note-%d", k)] = base64.StdEncoding.EncodeToString(random)
	}
	for k := range 1000 {
		e.Spec.ExportedLabels[fmt.Sprintf("label-%d", k)] = strings.Repeat("x", 63)
	}
	return e
}

// A tenant's ServiceExports, each with about 1.4 MB of exportedAnnotations
// and exportedLabels, cost the controller what an import may carry of
// them (desired.MaxExportedMetadata, 8 KiB) once cached, not what they
// hold: registering a member that serves 10 of them grows the heap the
// controller holds by at most hostileBulkyHeld (held whole, they would
// take 14 MiB more). And they are junk: 6 from a namespace the member may
// not export from, 3 with no Service, all older than the member's one
// export that can be used, which --member-max-exports of 1 still imports.
func TestHostileBulkyExports(t *testing.T) {
	if !hostilemember.Alone(t) {
		return
	}
	const (
		junk, noService = 6, 3
		// hostileMemberHeld is what a member's clients and informers hold,
		// its objects aside: 0.8 MiB measured.
		hostileMemberHeld = 2 << 20
		// hostileWatchHeld is what a watch keeps of the largest event it
		// decoded, for its life: client-go's JSON stream decoders keep
		// buffers of its size, at most a few times the 2 MiB an event may
		// take (controller/members/responses.go). 4.4 MiB measured after
		// events of 1.4 MB.
		hostileWatchHeld = 6 << 20
		hostileBulkyHeld = (junk+noService+1)*(desired.MaxExportedMetadata+4<<10) + hostileMemberHeld + hostileWatchHeld
	)
	h := hostilemember.New(t, m1, nil)
	h.Serve("namespaces", ns1(), &corev1.Namespace{ObjectMeta: metaName("tenant")})
	for i := range junk {
		h.Serve("serviceexports", bulkyExport(t, "tenant", fmt.Sprintf("junk-%d", i), t0))
		tenantSvc := service(fmt.Sprintf("junk-%d", i), false, t0)
		tenantSvc.Namespace = "tenant"
		h.Serve("services", tenantSvc)
	}
	for i := range noService {
		h.Serve("serviceexports", bulkyExport(t, ns, fmt.Sprintf("nosvc-%d", i), t0))
	}
	h.Serve("services", service("foo", false, t0))
	h.Serve("endpointslices", slice("foo", "foo-1", 1, "10.1.0.1"))
	h.Serve("serviceexports", bulkyExport(t, ns, "foo", t0.Add(time.Hour)))

	// member1 joins once the controller runs: what it holds of the member
	// is what the heap grows by.
	f := newFixture(t, world{hub: {ns1()}, m2: {ns1()}, m3: {ns1()}},
		hostileProvider(h), withOptions(Options{DefaultExports: HubNamespaces}), withMaxExports(1))
	// Its informers list as watches, as the API servers of today serve
	// them: each export a watch event (newFixture lists the fakes, which
	// cannot stream, the old way).
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	before := hostilemember.LiveHeap()
	peak := hostilemember.PeakHeap()
	if _, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Create(t.Context(), hostileSecret(h), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awaitHostile(t, "the hostile member never synced", func() bool {
		i := slices.IndexFunc(f.reg.List(), func(m *members.Member) bool { return m.Name == m1 })
		return i >= 0 && f.reg.List()[i].Synced()
	})
	used := peak()
	held := int64(hostilemember.LiveHeap()) - int64(before)
	t.Logf("held for the member: %.2f MiB (bound %.2f MiB); heap at its peak while it registered: %.1f MiB", float64(held)/(1<<20), float64(hostileBulkyHeld)/(1<<20), float64(used)/(1<<20))
	if held > hostileBulkyHeld {
		t.Errorf("the controller holds %.1f MiB for a member of %d bulky exports, want at most %.1f MiB", float64(held)/(1<<20), junk+noService+1, float64(hostileBulkyHeld)/(1<<20))
	}

	f.sync("demo/foo")
	f.importOf(m2, "foo") // fails the test when absent
	if c := exportStatus(h, ns, "foo"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("foo, the one export that can be used: Valid %+v, want True", c)
	}
	for _, k := range []string{"tenant/junk-0", "demo/nosvc-0"} {
		f.sync(k)
		namespace, name, _ := strings.Cut(k, "/")
		if c := exportStatus(h, namespace, name); c != nil && c.Reason == "TooManyExports" {
			t.Errorf("%s, junk: Valid %+v, want why it cannot be used", k, c)
		}
	}
}

// A member whose API server does not stream lists (its WatchList feature
// off: the informers list instead, and the API server answers the first
// list whole from its watch cache, whatever page it was asked for) holds
// a tenant's 30 ServiceExports of about 1.4 MB each, 42 MB in one list:
// each within what an API server stores, and all within --member-max-mib
// (its default, 192 MiB), as they would be streamed. The member stays
// registered and synced, its one valid export imports, what the
// controller holds of it grows by at most what the bulky exports cost
// trimmed, and the heap at its peak, while it lists, by at most
// hostileListPeak.
func TestHostileBulkyExportsListed(t *testing.T) {
	if !hostilemember.Alone(t) {
		return
	}
	const (
		bulky = 30
		// hostileListBytes is about what the list of the exports takes.
		hostileListBytes = bulky * 1400 << 10
		// hostileListPeak bounds the heap at its peak while the member
		// lists: the list as the controller reads it whole to count its
		// objects (controller/members/responses.go), as client-go reads it
		// again, and decoded, with the garbage of the copies' growth not yet
		// collected: 5 times the list, and the rest of the member
		// (hostileMemberPeak). 146-152 MiB measured alone (105 MiB without
		// the controller's reading), 214 MiB after the package's other
		// tests, the collector further behind.
		hostileMemberPeak = 32 << 20
		hostileListPeak   = hostileListBytes*5 + hostileMemberPeak
		// hostileListHeld is what the controller holds of the member
		// once it listed: the exports trimmed, and the member's clients
		// and informers (hostileMemberHeld in TestHostileBulkyExports).
		hostileListHeld = (bulky+1)*(desired.MaxExportedMetadata+4<<10) + 2<<20
	)
	h := hostilemember.New(t, m1, nil)
	h.RefuseWatchList()
	h.Serve("namespaces", ns1(), &corev1.Namespace{ObjectMeta: metaName("tenant")})
	for i := range bulky {
		h.Serve("serviceexports", bulkyExport(t, "tenant", fmt.Sprintf("bulky-%d", i), t0))
	}
	h.Serve("services", service("foo", false, t0))
	h.Serve("endpointslices", slice("foo", "foo-1", 1, "10.1.0.1"))
	h.Serve("serviceexports", export("foo", t0))

	f := newFixture(t, world{hub: {ns1()}, m2: {ns1()}, m3: {ns1()}},
		hostileProvider(h), withOptions(Options{DefaultExports: HubNamespaces}), withMaxBytes(192<<20))
	// Its informers ask for watch-lists, as client-go's do by default, and
	// fall back to lists when the API server refuses them.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, true)
	before := hostilemember.LiveHeap()
	peak := hostilemember.PeakHeap()
	if _, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Create(t.Context(), hostileSecret(h), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var m *members.Member
	awaitHostile(t, "the member of bulky exports, listed, never synced", func() bool {
		i := slices.IndexFunc(f.reg.List(), func(m *members.Member) bool { return m.Name == m1 })
		if i < 0 {
			return false
		}
		m = f.reg.List()[i]
		return m.Settled() // synced, or cut off
	})
	used := peak()
	held := int64(hostilemember.LiveHeap()) - int64(before)
	t.Logf("held for the member: %.2f MiB (bound %.2f MiB); heap at its peak while it listed: %.1f MiB (bound %.1f MiB)", float64(held)/(1<<20), float64(hostileListHeld)/(1<<20), float64(used)/(1<<20), float64(hostileListPeak)/(1<<20))
	if !m.Healthy() {
		t.Fatalf("the member is cut off: %v", m.Err())
	}
	if h.Lists("serviceexports") == 0 {
		t.Fatal("the member's exports were never listed: the test would not prove a list")
	}
	if held > hostileListHeld || used > hostileListPeak {
		t.Errorf("the controller holds %.1f MiB for the member and its heap peaked %.1f MiB higher, want at most %.1f and %.1f MiB", float64(held)/(1<<20), float64(used)/(1<<20), float64(hostileListHeld)/(1<<20), float64(hostileListPeak)/(1<<20))
	}
	f.sync("demo/foo")
	f.importOf(m2, "foo") // fails the test when absent
	if c := exportStatus(h, ns, "foo"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("foo, the member's valid export: Valid %+v, want True", c)
	}
	if !m.Healthy() {
		t.Errorf("the member is cut off after the sync: %v", m.Err())
	}
}

// A member's API server that sends events of ServiceExports and
// ServiceImports faster than --member-change-rate has their services
// queued no faster than its budget allows, as source slices are: a
// burst's worth at once, the others once the budget allows, each then.
func TestHostileMemberEventsPaced(t *testing.T) {
	const each, rate, burst = changeBurst * 3 / 2, 1, changeBurst
	name := func(i int) string { return fmt.Sprintf("svc-%d", i) }
	fc := clocktesting.NewFakeClock(t0)
	h := hostilemember.New(t, m1, nil)
	h.Serve("namespaces", ns1())
	f := newFixture(t, world{hub: {hostileSecret(h)}, m2: {ns1()}, m3: {ns1()}}, hostileProvider(h), withOptions(Options{Clock: fc, ChangeRate: rate}))
	// Once it has settled, its changes queue its services; what it
	// queued settling (nothing: it has no objects) is out of the way.
	awaitHostile(t, "the member never settled, its informers watching", func() bool {
		i := slices.IndexFunc(f.reg.List(), func(m *members.Member) bool { return m.Name == m1 })
		return i >= 0 && f.reg.List()[i].Settled() && h.Watching("serviceexports") > 0 && h.Watching("serviceimports") > 0
	})
	got := map[string]bool{}
	// The member's budget is full.
	if err := f.drainUntil(fc, got, 20*time.Second, func() bool { return true }, 0); err != nil {
		t.Fatal(err)
	}
	fc.Step(changeBurst * time.Second)
	clear(got)
	paced := func() int { return int(testutil.ToFloat64(changesPaced.WithLabelValues(m1))) }
	before, start := paced(), fc.Now()
	for i := range each {
		if h.Send("serviceexports", "ADDED", export(name(i), t0)) == 0 || h.Send("serviceimports", "ADDED", userImport(name(each+i))) == 0 {
			t.Fatal("no watch took the event")
		}
	}
	if err := f.drainUntil(fc, got, 20*time.Second, func() bool { return len(got)+paced()-before >= 2*each }, 0); err != nil {
		t.Fatalf("of %d services changed, %d queued and %d paced", 2*each, len(got), paced()-before)
	}
	if len(got) > burst*rate || paced()-before != 2*each-burst*rate {
		t.Errorf("of %d services changed, %d queued at once and %d paced; want %d and %d", 2*each, len(got), paced()-before, burst*rate, 2*each-burst*rate)
	}
	if err := f.drainUntil(fc, got, 20*time.Second, func() bool { return len(got) == 2*each }, 100*time.Millisecond); err != nil {
		t.Fatalf("%d of %d services queued once the budget allowed", len(got), 2*each)
	}
	if took, want := fc.Since(start), (2*each-burst*rate)/rate*time.Second; took < want {
		t.Errorf("every service queued %s after the changes, want %s at least", took, want)
	}
}

// userImport is a ServiceImport name of the member's own, as a tenant
// may make.
func userImport(name string) *mcsv1b1.ServiceImport {
	return &mcsv1b1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP}}
}
