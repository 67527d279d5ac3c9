package desired

import (
	"maps"

	"k8s.io/apimachinery/pkg/api/meta"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// EmptyImport takes back from another's ServiceImport, which nothing
// provides any more, what the controller filled in (api.AnnotationFilled
// says so): the addresses, as its spec.ips would name the deleted derived
// Service's VIP, and the native-name annotations when the controller added
// them. The type and ports stay, and so does the import: it is its owner's.
// The controller does it when a service leaves a cluster, and kubectl mcs
// unjoin when the controller has not cleaned a member in time.
func EmptyImport(i *mcsv1b1.ServiceImport) {
	filled := i.Annotations[api.AnnotationFilled]
	i.Spec.IPs, i.Spec.IPFamilies = nil, nil
	i.Annotations = maps.Clone(i.Annotations)
	delete(i.Annotations, api.AnnotationFilled)
	if filled == api.FilledStrategy {
		DropNative(i.Annotations)
	}
}

// EmptyImportStatus takes back the status EmptyImport's import was given:
// the providers and the Ready condition.
func EmptyImportStatus(i *mcsv1b1.ServiceImport) {
	i.Status.Clusters, i.Status.EndpointSliceObjects = nil, ""
	meta.RemoveStatusCondition(&i.Status.Conditions, string(mcsv1b1.ServiceImportConditionReady))
}

// DropNative deletes the annotations that turn native names on.
func DropNative(annotations map[string]string) {
	for _, k := range api.NativeAnnotations {
		delete(annotations, k)
	}
}
