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
//
// +kubebuilder:validation:XValidation:rule="!has(self.localFirst) || self.strategy == 'LocalFirst'",message="spec.localFirst applies to strategy LocalFirst only"
// +kubebuilder:validation:XValidation:rule="!has(self.localFirst) || !has(self.localFirst.failoverOrder) || !has(self.serviceProvisionClusters) || size(self.serviceProvisionClusters) == 0 || self.localFirst.failoverOrder.all(c, c in self.serviceProvisionClusters)",message="spec.localFirst.failoverOrder may name provision clusters only (spec.serviceProvisionClusters)"
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
	// +kubebuilder:validation:MaxItems=1000
	ServiceProvisionClusters []ClusterName `json:"serviceProvisionClusters,omitempty"`

	// ServiceConsumptionClusters are the clusters whose pods reach the
	// service by its native name. Empty: every member.
	//
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=1000
	ServiceConsumptionClusters []ClusterName `json:"serviceConsumptionClusters,omitempty"`

	// Strategy picks the endpoints a native name answers in a consumption
	// cluster: RemoteAndLocal (every provision cluster's) or LocalFirst (this
	// cluster's while one is ready, else the others').
	//
	// +optional
	// +kubebuilder:default=RemoteAndLocal
	// +kubebuilder:validation:Enum=RemoteAndLocal;LocalFirst
	Strategy api.Strategy `json:"strategy,omitempty"`

	// LocalFirst tunes strategy LocalFirst, and is allowed with it only.
	// Without it, LocalFirst answers this cluster's endpoints while one is
	// ready, and every other provision cluster's alike when none is.
	//
	// +optional
	LocalFirst *LocalFirstPolicy `json:"localFirst,omitempty"`
}

// LocalFirstPolicy says when a consumption cluster's own endpoints are
// enough, and which clusters take over when they are not.
type LocalFirstPolicy struct {
	// MinReadyEndpoints is the fewest ready endpoints of its own for which
	// a consumption cluster answers them: below it the cluster counts as
	// having none, and the other provision clusters answer (its own still
	// do when no other has a ready endpoint). Default 1.
	//
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReadyEndpoints *int32 `json:"minReadyEndpoints,omitempty"`

	// FailoverOrder lists provision clusters in the order they take over
	// when a consumption cluster's own endpoints are not enough: each
	// answers only while every cluster before it has no ready endpoint,
	// and provision clusters not listed come last, together. A consumption
	// cluster skips itself in the list. A cluster whose Lease has expired is
	// never chosen over one whose has not. Empty: every other provision
	// cluster alike.
	//
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.exists_one(d, d == c))",message="spec.localFirst.failoverOrder names a cluster twice"
	FailoverOrder []ClusterName `json:"failoverOrder,omitempty"`
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
