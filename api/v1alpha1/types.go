package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// MultiClusterService makes the Service of the same name and namespace
// discoverable across member clusters: the endpoints of its provision
// clusters are imported into its consumption clusters, where coredns-mcs
// answers the service's native cluster.local name by Strategy.
//
// +genclient
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mcsvc,categories=mcs
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.strategy`
// +kubebuilder:printcolumn:name="Applied",type=string,JSONPath=`.status.conditions[?(@.type=="EndpointSliceApplied")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 55 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a Service name (a DNS-1035 label) of at most 55 characters, so that derived-<name> is one too"
type MultiClusterService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MultiClusterServiceSpec   `json:"spec"`
	Status MultiClusterServiceStatus `json:"status,omitempty"`
}

// ExposureType says how a MultiClusterService exposes its service.
//
// +kubebuilder:validation:Enum=CrossCluster
type ExposureType string

// CrossCluster exposes the service to the consumption clusters by its
// native names.
const CrossCluster ExposureType = "CrossCluster"

// ClusterName is the name a member cluster is registered under.
//
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
type ClusterName string

// MultiClusterServiceSpec says where the service runs and who may reach it.
type MultiClusterServiceSpec struct {
	// Types lists how the service is exposed; CrossCluster is the one type.
	//
	// +kubebuilder:validation:MinItems=1
	// +listType=set
	Types []ExposureType `json:"types"`

	// ServiceProvisionClusters are the clusters whose endpoints serve the
	// service. Empty: every member that has the Service.
	//
	// +optional
	// +listType=set
	ServiceProvisionClusters []ClusterName `json:"serviceProvisionClusters,omitempty"`

	// ServiceConsumptionClusters are the clusters whose pods reach the
	// service by its native name. Empty: every member.
	//
	// +optional
	// +listType=set
	ServiceConsumptionClusters []ClusterName `json:"serviceConsumptionClusters,omitempty"`

	// Strategy picks the endpoints a native name answers in a consumption
	// cluster: RemoteAndLocal (every provision cluster's) or LocalFirst (this
	// cluster's while one is ready, else the others').
	//
	// +optional
	// +kubebuilder:default=RemoteAndLocal
	// +kubebuilder:validation:Enum=RemoteAndLocal;LocalFirst
	Strategy api.Strategy `json:"strategy,omitempty"`
}

// Condition types of a MultiClusterService.
const (
	// ServiceApplied: the hub's Service of the same name, if any, is in every
	// provision and consumption cluster.
	ServiceApplied = "ServiceApplied"
	// EndpointSliceCollected: the EndpointSlices of every provision cluster
	// are known.
	EndpointSliceCollected = "EndpointSliceCollected"
	// EndpointSliceApplied: every consumption cluster has the imported
	// slices, the ServiceImport and the derived Service.
	EndpointSliceApplied = "EndpointSliceApplied"
)

// MultiClusterServiceStatus reports what the controller did, per condition.
type MultiClusterServiceStatus struct {
	// Conditions are ServiceApplied, EndpointSliceCollected and
	// EndpointSliceApplied; a False one names the cluster and the cause.
	//
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MultiClusterServiceList is a list of MultiClusterServices.
//
// +kubebuilder:object:root=true
type MultiClusterServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MultiClusterService `json:"items"`
}
