//go:build lab

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// TestAlphaImportsAndClusterProperty: a cluster of the MCS API's first
// version, which serves ServiceImports as v1alpha1 only and names itself in
// the ClusterProperty cluster.clusterset.k8s.io rather than in the
// Corefile. mcs watches v1alpha1, knows itself by the property's value (its
// own imported slices are not remote), follows changes, and refuses to start
// once the value is no cluster name. The CRDs are the hub's for the test:
// the members' are shared and stay as they are.
func TestAlphaImportsAndClusterProperty(t *testing.T) {
	lab := labtest.Get(t)
	installServiceImportCRD(t, lab, "v1alpha1")
	installHubCRD(t, lab, clusterPropertyCRD(t))
	cluster := "hub-" + runID
	lab.Apply(t, labtest.Hub, clusterProperty(cluster))

	f := newFixtureIn(t, labtest.Hub)
	f.apply(
		f.alphaImport("api", "10.99.232.1"),
		f.importedSlice("api", cluster, ep("10.10.232.1")), // this cluster's own, imported back
		f.importedSlice("api", member2, ep("10.12.232.1")),
	)
	p := startCoreDNS(t, config{blocks: []block{vipBlock, endpointsBlock}, context: labtest.Hub, fromProperty: true})
	p.waitReady(t, 20*time.Second)
	p.expectLog(t, fmt.Sprintf("as cluster %q (ServiceImport v1alpha1)", cluster))
	vip, eps := p.servers[0], p.servers[1]
	native, clusterset := f.native("api"), f.clusterset("api")
	vip.expect(t, clusterset, dns.TypeA, answer(vip.addrs(clusterset, "10.99.232.1")))
	eps.expect(t, native, dns.TypeA, answer(eps.addrs(native, "10.12.232.1")))

	f.apply(f.alphaImport("api", "10.99.232.2"))
	vip.expect(t, clusterset, dns.TypeA, answer(vip.addrs(clusterset, "10.99.232.2")))

	lab.Apply(t, labtest.Hub, clusterProperty("Hub_"+runID))
	out := startupError(t, fmt.Sprintf("mcs {\n kubeconfig %s %s\n}", lab.Kubeconfig(), labtest.Hub))
	if want := fmt.Sprintf("Corefile:2 - option cluster is not set and ClusterProperty %s has spec.value %q, not a cluster name", clusterPropertyName, "Hub_"+runID); !containsAll(out, []string{want}) {
		t.Errorf("want %q in the output:\n%s", want, out)
	}
}

// alphaImport is a v1alpha1 ServiceImport of clusterset IP ip, with
// native names under RemoteAndLocal.
func (f *fixture) alphaImport(name, ip string) *mcsv1alpha1.ServiceImport {
	var ports []mcsv1alpha1.ServicePort
	for _, p := range importPorts {
		ports = append(ports, mcsv1alpha1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
	}
	return &mcsv1alpha1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name, Annotations: map[string]string{api.AnnotationStrategy: remoteAndLocal}},
		Spec:       mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{ip}, Ports: ports},
	}
}

// clusterPropertyCRD is the ClusterProperty CRD of KEP-2149 (about.k8s.io),
// with the one field mcs reads.
func clusterPropertyCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterproperties.about.k8s.io
  annotations:
    api-approved.kubernetes.io: "https://github.com/kubernetes/enhancements/pull/3084"
spec:
  group: about.k8s.io
  scope: Cluster
  names: {plural: clusterproperties, singular: clusterproperty, kind: ClusterProperty, listKind: ClusterPropertyList}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            required: [value]
            properties:
              value: {type: string, minLength: 1, maxLength: 128}
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// clusterPropertyName is the ClusterProperty that names a cluster (KEP-2149).
const clusterPropertyName = "cluster.clusterset.k8s.io"

func clusterProperty(value string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"value": value}}}
	u.SetAPIVersion("about.k8s.io/v1alpha1")
	u.SetKind("ClusterProperty")
	u.SetName(clusterPropertyName)
	return u
}

// installServiceImportCRD copies member1's ServiceImport CRD to the hub
// with only the given versions (the first of them stored), waits until it
// is established, and deletes it when the test ends.
func installServiceImportCRD(t *testing.T, lab *labtest.Lab, versions ...string) {
	t.Helper()
	crd, err := lab.Dynamic(t, labtest.Member1).Resource(labtest.CRDs).Get(t.Context(), serviceImportCRD, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(crd.Object, "status")
	for _, field := range []string{"uid", "creationTimestamp", "generation", "resourceVersion", "managedFields"} {
		unstructured.RemoveNestedField(crd.Object, "metadata", field)
	}
	all, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var kept []any
	for _, v := range all {
		version := v.(map[string]any)
		if slices.Contains(versions, version["name"].(string)) {
			version["storage"] = version["name"] == versions[0]
			kept = append(kept, version)
		}
	}
	if len(kept) != len(versions) {
		t.Fatalf("member1's %s has versions %v, want %v among them", serviceImportCRD, all, versions)
	}
	if err := unstructured.SetNestedSlice(crd.Object, kept, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	installHubCRD(t, lab, crd)
}

// installHubCRD creates crd on the hub, which must not have it (else it is
// someone else's), waits until it is established, and deletes it when the
// test ends.
func installHubCRD(t *testing.T, lab *labtest.Lab, crd *unstructured.Unstructured) {
	t.Helper()
	hub := lab.Dynamic(t, labtest.Hub).Resource(labtest.CRDs)
	name := crd.GetName()
	if _, err := hub.Get(t.Context(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the hub must not have CRD %s for this test (someone else's?): get: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := hub.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting the hub's %s: %v", name, err)
			return
		}
		for ctx.Err() == nil { // gone before the next test looks
			if _, err := hub.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
		t.Errorf("the hub's %s is still there", name)
	})
	lab.Apply(t, labtest.Hub, crd)
	lab.WaitEstablished(t, labtest.Hub, name)
}
