package desired

import (
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// Provider Services (api/providers.go): a ClusterIP Service per provider
// in LocalFirst's failover order, whose slices hold that provider's
// endpoints alone, so that with answer vip the mcs plugin can answer a VIP
// that kube-proxy routes to the first ordered provider only. They are made
// only for the services that name an order, in the clusters that consume
// them: the cost (a ClusterIP, a copy of the provider's slices, their
// kube-proxy rules) is paid only where it is used.

// providers lists the providers in spec's failover order that have the
// Service; none for a headless import, which has no VIP to answer.
func providers(spec v1alpha1.MultiClusterServiceSpec, imp *Import) []string {
	if imp.Headless || spec.LocalFirst == nil {
		return nil
	}
	var out []string
	for _, c := range spec.LocalFirst.FailoverOrder {
		if slices.Contains(imp.Clusters, string(c)) {
			out = append(out, string(c))
		}
	}
	return out
}

// providerSlices are the copies of the imported slices of the providers
// named, each joined to its provider's Service and named apart from every
// imported slice (api.ProviderSlicePrefix). They keep the multicluster
// labels of the slice they copy, so that the controller finds them among
// the service's imported slices and deletes the ones no longer wanted; the
// mcs plugin answers from the slices joined to derived-<svc> alone.
func providerSlices(svc string, imported []*discoveryv1.EndpointSlice, providers []string) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, s := range imported {
		c := s.Labels[mcsv1b1.LabelSourceCluster]
		if !slices.Contains(providers, c) {
			continue
		}
		cp := s.DeepCopy()
		cp.Name = api.ProviderSlicePrefix + s.Name
		if len(cp.Name) > validation.DNS1123SubdomainMaxLength {
			cp.Name = withHash(cp.Name, cp.Name)
		}
		cp.Labels[discoveryv1.LabelServiceName] = api.ProviderService(svc, c)
		out = append(out, cp)
	}
	return out
}
