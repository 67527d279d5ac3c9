package mcs

import (
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The ClusterProperty that names this cluster (KEP-2149).
var clusterPropertyGVR = schema.GroupVersionResource{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}

const clusterPropertyName = "cluster.clusterset.k8s.io"

// errConfig marks start-up errors that retrying cannot fix: the Corefile or
// the cluster must change.
var errConfig = errors.New("configuration error")

// clusterName is the cluster option, else the ClusterProperty's spec.value.
func (w *watcher) clusterName(ctx context.Context) (string, error) {
	if w.cfg.cluster != "" {
		return w.cfg.cluster, nil
	}
	u, err := w.cl.dyn.Resource(clusterPropertyGVR).Get(ctx, clusterPropertyName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("%w: %s - option cluster is not set and ClusterProperty %s does not exist (or its CRD is not served); set cluster NAME", errConfig, w.cfg.where, clusterPropertyName)
	}
	if err != nil {
		return "", fmt.Errorf("reading ClusterProperty %s: %w", clusterPropertyName, err)
	}
	return clusterFromProperty(u, w.cfg.where)
}

func clusterFromProperty(u *unstructured.Unstructured, where string) (string, error) {
	v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
	if errs := validation.IsDNS1123Label(v); len(errs) > 0 {
		return "", fmt.Errorf("%w: %s - option cluster is not set and ClusterProperty %s has spec.value %q, not a cluster name: %s", errConfig, where, clusterPropertyName, v, errs[0])
	}
	return v, nil
}

// importVersion picks the ServiceImport version the API server serves:
// v1beta1 when it can, v1alpha1 otherwise; ok is false when it serves
// neither (the MCS API CRDs are not installed).
func (w *watcher) importVersion() (gv schema.GroupVersion, ok bool, err error) {
	for _, gv := range []schema.GroupVersion{mcsv1b1.SchemeGroupVersion, mcsv1a1.SchemeGroupVersion} {
		served, err := w.serves(gv, "serviceimports")
		if err != nil || served {
			return gv, served, err
		}
	}
	return schema.GroupVersion{}, false, nil
}

func (w *watcher) serves(gv schema.GroupVersion, resource string) (bool, error) {
	list, err := w.cl.kube.Discovery().ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}
