package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
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
// costs no budget. What the controller's heap takes at its peak, the
// member's registration and every sync included, stays within
// hostileBudgetHeap.
func TestHostileProviderEndpointBudget(t *testing.T) {
	const (
		exports, perExport, perSlice = 40, 500, 100
		budget                       = 2000
		fit                          = budget / perExport
		// hostileBudgetHeap bounds the heap's peak: the caches of 20,000
		// endpoints, what decoding them took, and the imports of the 2,000
		// of the budget in three consumers (two fakes that keep each write
		// twice, and the member's own), with the race detector's toll.
		hostileBudgetHeap = 96 << 20
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

	peak := hostilemember.PeakHeap()
	f := newFixture(t, world{hub: {hostileSecret(h)}, m2: {ns1()}, m3: {ns1()}},
		hostileProvider(h), withOptions(Options{MemberMaxEndpoints: budget, MaxImportedEndpoints: 10000, MaxImportedPorts: 16}))
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
	for queued(f.c, "") {
	}
	used := peak()
	t.Logf("heap at its peak: %.1f MiB over what was live before (bound %d MiB)", float64(used)/(1<<20), hostileBudgetHeap>>20)
	if used > hostileBudgetHeap {
		t.Errorf("the hostile provider took the controller's heap %d MiB over what it held, want at most %d MiB", used>>20, hostileBudgetHeap>>20)
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

// awaitHostile waits until cond holds, polling.
func awaitHostile(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatal(what)
	}
}
