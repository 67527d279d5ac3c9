package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// memberClients reach the member (--context) with any object of a manifest.
type memberClients struct {
	cfg    *rest.Config
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func memberOf(flags *genericclioptions.ConfigFlags) (*memberClients, error) {
	cfg, err := flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("the member (--context): %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper, err := flags.ToRESTMapper()
	if err != nil {
		return nil, err
	}
	return &memberClients{cfg: cfg, kube: kube, dyn: dyn, mapper: mapper}, nil
}

// each calls f with every object of doc and its resource's client, in its
// namespace when it has one.
func (m *memberClients) each(doc []byte, f func(dynamic.ResourceInterface, *unstructured.Unstructured) error) error {
	objs, err := decode(doc)
	if err != nil {
		return err
	}
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
		}
		var r dynamic.ResourceInterface = m.dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			r = m.dyn.Resource(mapping.Resource).Namespace(u.GetNamespace())
		}
		if err := f(r, u); err != nil {
			return err
		}
	}
	return nil
}

// apply server-side applies an object, as kubectl apply --server-side
// does, taking over fields another manager set.
func (m *memberClients) apply(ctx context.Context, dryRun []string) func(dynamic.ResourceInterface, *unstructured.Unstructured) error {
	return func(r dynamic.ResourceInterface, u *unstructured.Unstructured) error {
		body, err := json.Marshal(u)
		if err != nil {
			return err
		}
		if _, err := r.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true), DryRun: dryRun}); err != nil {
			return fmt.Errorf("applying %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		return nil
	}
}

// validClusterName is the controller's rule for a member's name: a DNS
// label, which the member's Leases and imported slices are named after.
func validClusterName(cluster string) error {
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return fmt.Errorf("cluster name %q: %s", cluster, strings.Join(errs, "; "))
	}
	return nil
}
