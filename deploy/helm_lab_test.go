//go:build lab

package deploy_test

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// helmConfig is Helm's client of the lab's cluster, keeping its releases
// in namespace's Secrets, as the helm CLI does by default.
func helmConfig(t *testing.T, cluster, namespace string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Context, flags.Namespace = ptr.To(labtest.Get(t).Kubeconfig()), ptr.To(cluster), ptr.To(namespace)
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, namespace, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	// The lab's API servers, built from source without version stamps,
	// say they are v0.0.0, which fails the chart's kubeVersion; they are
	// k8s.io/kubernetes v1.36.3 (test/lab/go.mod), which Helm is told
	// instead of asking. The charts ask nothing else of the server.
	cfg.Capabilities = chartutil.DefaultCapabilities.Copy()
	cfg.Capabilities.KubeVersion = *labKube
	return cfg
}

// The chart installs on the hub as helm install does, for real, upgrades to
// shards, and uninstalls leaving nothing but the CRD, which Helm never
// deletes (and the Namespace, which it never made). First, every object it
// renders with every opt-in is accepted by a strict server-side dry run
// (Helm's own writes only warn of an unknown field), but the Prometheus
// Operator's kinds, which the lab does not serve, so monitoring stays off
// in the release. The release goes into a namespace of the test's own,
// under names of its own (fullnameOverride), as the ClusterRole and its
// binding are cluster-wide on the shared hub.
func TestHelmInstallsOnTheHub(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ns := l.Namespace(t, hub)
	cfg := helmConfig(t, hub, ns)
	chrt, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{"fullnameOverride": ns, "networkPolicy": map[string]any{"enabled": true}}
	a := newApplier(t, hub)
	all := map[string]any{"fullnameOverride": ns, "shards": map[string]any{"enabled": true},
		"networkPolicy": map[string]any{"enabled": true}, "monitoring": map[string]any{"enabled": true}}
	for _, u := range renderChart(t, ns, all) {
		if u.GroupVersionKind().Group == prometheusOperator {
			continue
		}
		if err := a.apply(t.Context(), u, true); err != nil {
			t.Errorf("the chart's %v", err)
		}
	}
	t.Cleanup(func() { uninstallQuietly(t, cfg, release) })

	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Timeout = release, ns, time.Minute
	rel, err := install.RunWithContext(t.Context(), chrt, vals)
	if err != nil {
		t.Fatalf("helm install: %v", err)
	}
	objs := decodeManifests(t, rel.Manifest)
	expectStored(t, a, objs, true)
	t.Logf("installed %d objects: %v", len(objs), keys(objs))

	vals["shards"] = map[string]any{"enabled": true}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace, upgrade.Timeout = ns, time.Minute
	rel, err = upgrade.RunWithContext(t.Context(), release, chrt, vals)
	if err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("helm upgrade to shards: %v", err)
	}
	expectShards(t, a, ns)

	if _, err := action.NewUninstall(cfg).Run(release); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	expectStored(t, a, decodeManifests(t, rel.Manifest), false)
	l.WaitEstablished(t, hub, "multiclusterservices.mcs.coredns-mcs.io")
}

// keys names objs.
func keys(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, objectKey(u))
	}
	return out
}

// expectStored fails unless each of objs is stored on the hub (want) or is
// gone (!want), the CRD aside, which Helm installs only when missing and
// never deletes.
func expectStored(t *testing.T, a *applier, objs []*unstructured.Unstructured, want bool) {
	t.Helper()
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		ri, err := a.resource(u)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.Get(t.Context(), u.GetName(), metav1.GetOptions{})
		switch {
		case want && err != nil:
			t.Errorf("%s after helm install: %v", objectKey(u), err)
		case want && got.GetLabels()["app.kubernetes.io/instance"] != release:
			t.Errorf("%s is stored without its release's label: %v", objectKey(u), got.GetLabels())
		case !want && !apierrors.IsNotFound(err):
			t.Errorf("%s after helm uninstall: %v, want not found", objectKey(u), err)
		}
	}
}

// expectShards fails unless the hub holds the sharded Deployment and the
// Role that grants the shards' Leases.
func expectShards(t *testing.T, a *applier, ns string) {
	t.Helper()
	deploy := &unstructured.Unstructured{}
	deploy.SetAPIVersion("apps/v1")
	deploy.SetKind("Deployment")
	deploy.SetNamespace(ns)
	ri, err := a.resource(deploy)
	if err != nil {
		t.Fatal(err)
	}
	d, err := ri.Get(t.Context(), ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	if args := containerArgs(t, d); replicas != 4 || args[len(args)-2] != "--shards=4" {
		t.Errorf("after the upgrade to shards the hub's Deployment has %d replicas and args %v, want 4 and --shards=4", replicas, args)
	}
}

// uninstallQuietly takes the release back when the test stopped before
// its own uninstall: its ClusterRole and binding outlive the namespace.
func uninstallQuietly(t *testing.T, cfg *action.Configuration, release string) {
	uninstall := action.NewUninstall(cfg)
	uninstall.IgnoreNotFound = true
	if _, err := uninstall.Run(release); err != nil {
		t.Logf("helm uninstall at cleanup: %v", err)
	}
}
