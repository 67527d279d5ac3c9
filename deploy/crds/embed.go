// Package crds embeds the generated CustomResourceDefinitions, so that tests
// and the lab install exactly what an operator applies.
package crds

import _ "embed"

// MultiClusterService is the CRD of mcs.coredns-mcs.io/v1alpha1 MultiClusterService.
//
//go:embed mcs.coredns-mcs.io_multiclusterservices.yaml
var MultiClusterService []byte
