//go:build lab

package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

func TestMain(m *testing.M) {
	labtest.Main(m)
}

// applier server-side applies rendered objects to one lab cluster.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(t *testing.T, cluster string) *applier {
	t.Helper()
	cfg := labtest.Get(t).Config(t, cluster)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: labtest.Get(t).Dynamic(t, cluster), mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// resource is the client of u's kind and namespace.
func (a *applier) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(mapping.Resource).Namespace(u.GetNamespace()), nil
	}
	return a.dyn.Resource(mapping.Resource), nil
}

// apply applies u as kubectl apply --server-side --force-conflicts does,
// strict about unknown fields, only as a dry run when dryRun is set.
func (a *applier) apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) error {
	ri, err := a.resource(u)
	if err != nil {
		return err
	}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "deploy-test", Force: ptr.To(true), FieldValidation: metav1.FieldValidationStrict}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), strings.TrimPrefix(u.GetNamespace()+"/"+u.GetName(), "/"), err)
	}
	return nil
}

// Every overlay is accepted by the API server of the cluster it is for, as
// kubectl apply --server-side --dry-run=server: the hub overlay by the hub,
// the member overlays by a member, the member Secret example by the hub.
func TestOverlaysApplyToTheLab(t *testing.T) {
	for _, o := range overlays {
		t.Run(o.dir, func(t *testing.T) {
			a := newApplier(t, o.cluster)
			objs := render(t, o.dir)
			for _, u := range objs {
				if err := a.apply(t.Context(), u, true); err != nil {
					t.Errorf("%s to %s: %v", o.dir, o.cluster, err)
				}
			}
			t.Logf("%s: %d objects accepted by %s", o.dir, len(objs), o.cluster)
		})
	}
}

// The opt-in components' objects are accepted by the API servers of the
// clusters they are for, as the overlays' are (TestOverlaysApplyToTheLab),
// all but the Prometheus Operator's kinds, which the lab does not serve.
func TestComponentsApplyToTheLab(t *testing.T) {
	for _, o := range withComponents {
		t.Run(o.dir, func(t *testing.T) {
			a := newApplier(t, o.cluster)
			var skipped []string
			for _, u := range render(t, o.dir) {
				if u.GroupVersionKind().Group == prometheusOperator {
					skipped = append(skipped, u.GetKind()+" "+u.GetName())
					continue
				}
				if err := a.apply(t.Context(), u, true); err != nil {
					t.Errorf("%s to %s: %v", o.dir, o.cluster, err)
				}
			}
			t.Logf("%s: not applied, the lab has no Prometheus Operator: %v", o.dir, skipped)
		})
	}
}
