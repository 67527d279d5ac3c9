package mcs

import (
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	coordinformers "k8s.io/client-go/informers/coordination/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"
	mcsinformersv1a1 "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions/apis/v1alpha1"
	mcsinformersv1b1 "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The informers are the factories' own, but for their store's namespace
// index, which the factories' accessors add: mcs answers from its index
// and never reads a store by namespace, and that index costs a set entry
// an object (BenchmarkIndexMemory). The factories still trim every object,
// start and stop them.
var noIndex = cache.Indexers{}

// notDerived leaves out the derived-<svc> Services the controller writes,
// one per imported service, which mcs has no use for: it answers from the
// ServiceImport and the imported slices, and asks the kubernetes plugin
// about a derived Service (derived.go). Any other Service named
// derived-<svc> (a user's, unlabelled) is still read.
func notDerived(o *metav1.ListOptions) {
	o.LabelSelector = api.LabelManagedBy + "!=" + api.ManagedBy
}

func servicesInformer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, resync, noIndex, notDerived)
	})
}

func slicesInformer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return discoveryinformers.NewEndpointSliceInformer(c, metav1.NamespaceAll, resync, noIndex)
	})
}

func namespacesInformer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.InformerFor(&corev1.Namespace{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewNamespaceInformer(c, resync, noIndex)
	})
}

// leasesInformer watches the namespace of the providers' Leases alone.
func leasesInformer(f informers.SharedInformerFactory) cache.SharedIndexInformer {
	return f.InformerFor(&coordv1.Lease{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coordinformers.NewLeaseInformer(c, api.LeaseNamespace, resync, noIndex)
	})
}

// importsInformer watches ServiceImports of the version the API server
// serves, v1beta1 (beta) or v1alpha1, and only that one: a factory starts
// every informer it was asked for, and a cluster serving both versions, as
// the MCS API CRDs do, would have every import twice.
func importsInformer(f mcsinformers.SharedInformerFactory, beta bool) cache.SharedIndexInformer {
	if beta {
		return f.InformerFor(&mcsv1b1.ServiceImport{}, func(c mcsclient.Interface, resync time.Duration) cache.SharedIndexInformer {
			return mcsinformersv1b1.NewServiceImportInformer(c, metav1.NamespaceAll, resync, noIndex)
		})
	}
	return f.InformerFor(&mcsv1a1.ServiceImport{}, func(c mcsclient.Interface, resync time.Duration) cache.SharedIndexInformer {
		return mcsinformersv1a1.NewServiceImportInformer(c, metav1.NamespaceAll, resync, noIndex)
	})
}
