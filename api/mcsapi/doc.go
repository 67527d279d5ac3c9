// Package mcsapi is what mcs-controller and the mcs plugin share of reading
// the MCS API (sigs.k8s.io/mcs-api) from a cluster: which version of a
// resource the cluster serves, and the v1alpha1 objects of a cluster that
// serves no v1beta1 as the v1beta1 types both programs work with.
package mcsapi
