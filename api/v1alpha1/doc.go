// Package v1alpha1 is the hub API of coredns-mcs: the MultiClusterService
// that makes a service discoverable across member clusters by its native
// name.
//
// +kubebuilder:object:generate=true
// +groupName=mcs.coredns-mcs.io
package v1alpha1
