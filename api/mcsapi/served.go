package mcsapi

import (
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Resources of the MCS API.
const (
	ServiceExports = "serviceexports"
	ServiceImports = "serviceimports"
)

// Versions are the MCS API versions read, preferred first.
var Versions = []schema.GroupVersion{mcsv1b1.SchemeGroupVersion, mcsv1a1.SchemeGroupVersion}

// Served reports which version of resource the cluster serves, v1beta1
// preferred; ok is false when it serves neither (the MCS API CRDs are not
// installed). err is an error of discovery itself: the cluster could not
// say.
func Served(d discovery.ServerResourcesInterface, resource string) (gv schema.GroupVersion, ok bool, err error) {
	for _, gv := range Versions {
		if ok, err := Serves(d, gv, resource); err != nil || ok {
			return gv, ok, err
		}
	}
	return schema.GroupVersion{}, false, nil
}

// Serves reports whether the cluster serves resource in gv (of any API
// group: the hub's MultiClusterService too).
func Serves(d discovery.ServerResourcesInterface, gv schema.GroupVersion, resource string) (bool, error) {
	list, err := d.ServerResourcesForGroupVersion(gv.String())
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discovering %s: %w", gv, err)
	}
	return slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }), nil
}

// IsAlpha reports whether gv is the MCS API's v1alpha1.
func IsAlpha(gv schema.GroupVersion) bool { return gv == mcsv1a1.SchemeGroupVersion }
