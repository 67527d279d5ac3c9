package mcsapi

import (
	"unsafe"

	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// v1alpha1 and v1beta1 of mcs-api are the same Go types in two packages
// (v1beta1 was v1alpha1 promoted unchanged), so a conversion is a pointer
// cast, as Kubernetes' conversion-gen makes between types of equal memory
// layout; TestSameLayout fails the day an mcs-api release makes them
// differ. The converted object shares its fields with the original: convert
// a copy to change it.

// ImportToBeta is a v1alpha1 ServiceImport as a v1beta1 one.
func ImportToBeta(in *mcsv1a1.ServiceImport) *mcsv1b1.ServiceImport {
	return (*mcsv1b1.ServiceImport)(unsafe.Pointer(in))
}

// ImportToAlpha is a v1beta1 ServiceImport as a v1alpha1 one.
func ImportToAlpha(in *mcsv1b1.ServiceImport) *mcsv1a1.ServiceImport {
	return (*mcsv1a1.ServiceImport)(unsafe.Pointer(in))
}

// ExportToBeta is a v1alpha1 ServiceExport as a v1beta1 one.
func ExportToBeta(in *mcsv1a1.ServiceExport) *mcsv1b1.ServiceExport {
	return (*mcsv1b1.ServiceExport)(unsafe.Pointer(in))
}

// ExportToAlpha is a v1beta1 ServiceExport as a v1alpha1 one.
func ExportToAlpha(in *mcsv1b1.ServiceExport) *mcsv1a1.ServiceExport {
	return (*mcsv1a1.ServiceExport)(unsafe.Pointer(in))
}

// ToBeta is obj as a v1beta1 ServiceImport or ServiceExport when it is a
// v1alpha1 one, else obj: an informer transform for clusters that serve
// v1alpha1.
func ToBeta(obj any) (any, error) {
	switch o := obj.(type) {
	case *mcsv1a1.ServiceImport:
		return ImportToBeta(o), nil
	case *mcsv1a1.ServiceExport:
		return ExportToBeta(o), nil
	}
	return obj, nil
}
