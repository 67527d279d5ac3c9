package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// SchemeGroupVersion is the group and version of this package's types.
var SchemeGroupVersion = schema.GroupVersion{Group: api.GroupName, Version: "v1alpha1"}

// MultiClusterServiceResource is the MultiClusterService resource, for
// dynamic clients.
var MultiClusterServiceResource = SchemeGroupVersion.WithResource("multiclusterservices")

// Resource qualifies a resource name of this package with its group, as the
// generated listers' not-found errors need.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Finalizer holds a MultiClusterService until what it created is removed.
const Finalizer = api.GroupName + "/cleanup"

// AddToScheme registers this package's types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion, &MultiClusterService{}, &MultiClusterServiceList{})
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
