//go:build lab

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// oldMCSAPI is the MCS API's first release: ServiceExport and ServiceImport
// in v1alpha1 only, without what later releases added (the import's
// ipFamilies and conditions, the export's spec, observedGeneration).
const oldMCSAPI = "sigs.k8s.io/mcs-api@v0.1.0"

// TestV1alpha1Member: a member that installed oldMCSAPI's CRDs, and never
// upgraded, exports and imports alongside members of today's API. The hub
// plays that member here (registered as member "hub"), since the members'
// CRDs are shared by every test. Its v1alpha1 ServiceExport makes it a
// provider, its export gets its conditions, it gets a v1alpha1
// ServiceImport with the clusterset VIP of its derived Service, which
// coredns-mcs answers there; the other members import its endpoints; and
// the fields its CRDs drop cost no write once the service has converged.
func TestV1alpha1Member(t *testing.T) {
	l := labtest.Get(t)
	for _, crd := range oldCRDs(t) {
		installHubCRD(t, l, crd)
	}
	hub := labtest.Hub
	ns := l.Namespace(t, hub, m1, m2)
	l.Workload(t, m1, ns, "foo", 2, false)
	l.Workload(t, hub, ns, "foo", 1, false)
	l.Apply(t, m1, labtest.ServiceExport(ns, "foo"))
	export := &unstructured.Unstructured{} // oldMCSAPI's has no spec
	export.SetAPIVersion(mcsv1alpha1.GroupVersion.String())
	export.SetKind("ServiceExport")
	export.SetNamespace(ns)
	export.SetName("foo")
	l.Apply(t, hub, export)
	// The last --clusters-kubeconfig wins: the hub joins as a member.
	ctl := startController(t, ns, "--clusters-kubeconfig", l.KubeconfigOf(t, hub, m1, m2))

	hubIPs, m1IPs := readyIPs(t, hub, ns, "foo", 1), readyIPs(t, m1, ns, "foo", 2)
	var vip string
	labtest.Eventually(t, converge, func(ctx context.Context) (err error) {
		if vip, err = alphaImportOf(ctx, t, ns); err != nil {
			return err
		}
		if err := alphaExportConditions(ctx, t, ns); err != nil {
			return err
		}
		if err := importedFrom(ctx, t, ns, "foo", map[string][]string{hub: hubIPs, m1: m1IPs}); err != nil {
			return err
		}
		return betaImportClusters(ctx, t, ns, hub, m1)
	})

	p := startCoreDNS(t, config{context: hub, cluster: hub, blocks: []block{vipBlock}})
	p.waitReady(t, startTimeout)
	set, hubDNS := clusterset("foo", ns), p.servers[0]
	hubDNS.expectWithin(t, converge, set, dns.TypeA, answer(hubDNS.addrs(set, vip)))

	before := ctl.writes(t)
	time.Sleep(3 * time.Second) // several probes and syncs of the unchanged world
	if after := ctl.writes(t); !maps.Equal(before, after) {
		t.Errorf("the controller wrote on an unchanged world: %v, then %v", before, after)
	}
}

// oldCRDs are oldMCSAPI's ServiceExport and ServiceImport CRDs, from the Go
// module cache (downloaded through the module proxy when missing).
func oldCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "mod", "download", "-json", oldMCSAPI).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", oldMCSAPI, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: %q (%v)", oldMCSAPI, out, err)
	}
	var crds []*unstructured.Unstructured
	for _, name := range []string{"serviceexports", "serviceimports"} {
		text, err := os.ReadFile(filepath.Join(mod.Dir, "config", "crd", "multicluster.x-k8s.io_"+name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(text, &u.Object); err != nil {
			t.Fatalf("%s's %s CRD: %v", oldMCSAPI, name, err)
		}
		crds = append(crds, u)
	}
	return crds
}

// getAs reads cluster's object name of resource gvr in ns into out.
func getAs[T any](ctx context.Context, t *testing.T, cluster string, gvr schema.GroupVersionResource, ns, name string, out *T) (*T, error) {
	u, err := labtest.Get(t).Dynamic(t, cluster).Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cluster, err)
	}
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

// alphaImportOf returns the VIP of the hub's v1alpha1 ServiceImport of foo
// once it is what the controller makes: the type, ports and VIP of
// derived-foo, which it owns, and both providers in its status.
func alphaImportOf(ctx context.Context, t *testing.T, ns string) (string, error) {
	imp, err := getAs(ctx, t, labtest.Hub, mcsv1alpha1.SchemeGroupVersion.WithResource("serviceimports"), ns, "foo", &mcsv1alpha1.ServiceImport{})
	if err != nil {
		return "", err
	}
	derived, err := labtest.Get(t).Client(t, labtest.Hub).CoreV1().Services(ns).Get(ctx, api.DerivedPrefix+"foo", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("hub: %w", err)
	}
	s := imp.Spec
	var clusters []string
	for _, c := range imp.Status.Clusters {
		clusters = append(clusters, c.Cluster)
	}
	owners := derived.OwnerReferences
	switch {
	case s.Type != mcsv1alpha1.ClusterSetIP || len(s.Ports) != 1 || s.Ports[0].Port != 80:
		return "", fmt.Errorf("hub: import type %s ports %+v", s.Type, s.Ports)
	case len(s.IPs) != 1 || !slices.Equal(s.IPs, derived.Spec.ClusterIPs):
		return "", fmt.Errorf("hub: import ips %v, want derived-foo's %v", s.IPs, derived.Spec.ClusterIPs)
	case len(owners) != 1 || owners[0].APIVersion != mcsv1alpha1.GroupVersion.String() || owners[0].UID != imp.UID:
		return "", fmt.Errorf("hub: derived-foo's owners %+v, want the v1alpha1 ServiceImport", owners)
	case !slices.Equal(clusters, []string{labtest.Hub, m1}):
		return "", fmt.Errorf("hub: import clusters %v", clusters)
	}
	return s.IPs[0], nil
}

// alphaExportConditions fails unless the hub's v1alpha1 ServiceExport of foo
// is valid, ready and without conflict (oldMCSAPI's conditions have no
// observedGeneration).
func alphaExportConditions(ctx context.Context, t *testing.T, ns string) error {
	exp, err := getAs(ctx, t, labtest.Hub, mcsv1alpha1.SchemeGroupVersion.WithResource("serviceexports"), ns, "foo", &mcsv1alpha1.ServiceExport{})
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, c := range exp.Status.Conditions {
		got[c.Type] = string(c.Status) + "/" + c.Reason
	}
	if want := map[string]string{"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "False/NoConflicts"}; !maps.Equal(got, want) {
		return fmt.Errorf("hub: export conditions %v, want %v", got, want)
	}
	return nil
}

// importedFrom fails unless member2's imported slices of service name
// hold, per source cluster, exactly want's addresses.
func importedFrom(ctx context.Context, t *testing.T, ns, name string, want map[string][]string) error {
	list, err := labtest.Get(t).Client(t, m2).DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + name})
	if err != nil {
		return err
	}
	got := map[string][]string{}
	for _, s := range list.Items {
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		for _, e := range s.Endpoints {
			got[source] = append(got[source], e.Addresses...)
		}
	}
	for _, addrs := range got {
		slices.Sort(addrs)
	}
	for c, addrs := range want {
		want[c] = slices.Sorted(slices.Values(addrs))
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		return fmt.Errorf("member2 imports %v, want %v", got, want)
	}
	return nil
}

// betaImportClusters fails unless member2's ServiceImport of foo names
// clusters as its providers.
func betaImportClusters(ctx context.Context, t *testing.T, ns string, clusters ...string) error {
	imp, err := getAs(ctx, t, m2, mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports"), ns, "foo", &mcsv1beta1.ServiceImport{})
	if err != nil {
		return err
	}
	var got []string
	for _, c := range imp.Status.Clusters {
		got = append(got, c.Cluster)
	}
	if !slices.Equal(got, clusters) {
		return fmt.Errorf("member2: import clusters %v, want %v", got, clusters)
	}
	return nil
}
