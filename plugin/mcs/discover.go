package mcs

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
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
	return mcsapi.Served(w.cl.kube.Discovery(), mcsapi.ServiceImports)
}
