package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// A hub restored from a backup (docs/operations.md, "Hub backup and
// restore"): the controller restarted over it finds, in the members, what
// it had written. Restored with its labelled namespace before the
// controller starts, the hub gives the same answer as before: no write
// anywhere. Restored without that namespace, the same controller
// withdraws the import from every consumer at its first sync, under either
// hub default, which is why the page's order restores Namespaces before
// the controller.
func TestHubRestore(t *testing.T) {
	for name, d := range map[string]DefaultExports{"labelled": LabelledHubNamespaces, "hub": HubNamespaces} {
		t.Run(name, func(t *testing.T) { hubRestore(t, d) })
	}
}

// hubRestore is TestHubRestore under the hub default d.
func hubRestore(t *testing.T, d DefaultExports) {
	labelled := &corev1.Namespace{ObjectMeta: metaName(ns)}
	labelled.Labels = map[string]string{api.LabelExports: api.ExportsAllowed}
	f := newFixture(t, world{
		hub: {labelled},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2:  {ns1()},
		m3:  {ns1()},
	}, withOptions(Options{DefaultExports: d}))
	f.sync("demo/foo")
	if imp := f.importOf(m2, "foo"); len(imp.Status.Clusters) != 1 {
		t.Fatalf("before the restore, member2 imports foo from %+v, want member1", imp.Status.Clusters)
	}

	f.restart()
	expect(t, "a hub restored with its namespaces, then the controller", f.sync("demo/foo"), writes{})

	f.stop()
	if err := f.hubKube.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("namespaces"), "", ns); err != nil {
		t.Fatal(err)
	}
	f.start()
	gone := removed("foo")
	expect(t, "a hub restored without its namespaces", f.sync("demo/foo"), writes{
		m1: append(gone, "update serviceexports/status demo/foo"), m2: gone, m3: gone,
	})
}
