package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// importedSlices copies every source slice of the provision clusters that
// have the Service into the slice a consumption cluster gets.
func importedSlices(in *Input, clusters []string) (out []*discoveryv1.EndpointSlice, skipped []string) {
	for _, c := range clusters {
		for _, s := range in.Members[c].Slices {
			if s.AddressType == discoveryv1.AddressTypeFQDN {
				skipped = append(skipped, fmt.Sprintf("%s: EndpointSlice %s has address type FQDN, which a Service cannot route to", c, s.Name))
				continue
			}
			out = append(out, Imported(c, in.Name, s))
		}
	}
	return out, skipped
}

// Imported is source slice s of cluster's service svc as a consumption
// cluster holds it: labelled so that kube-proxy programs derived-<svc> and
// coredns-mcs files it under svc, and without the fields that point into
// the source cluster (node, target).
func Imported(cluster, svc string, s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: s.Namespace,
			Name:      ImportedName(cluster, s.Name),
			Labels: map[string]string{
				mcsv1b1.LabelServiceName:     svc,
				mcsv1b1.LabelSourceCluster:   cluster,
				discoveryv1.LabelServiceName: api.DerivedPrefix + svc,
				discoveryv1.LabelManagedBy:   api.ManagedBy,
			},
			Annotations: map[string]string{api.AnnotationSourceGeneration: strconv.FormatInt(s.Generation, 10)},
		},
		AddressType: s.AddressType,
		Ports:       s.Ports,
		Endpoints:   make([]discoveryv1.Endpoint, 0, len(s.Endpoints)),
	}
	for _, e := range s.Endpoints {
		out.Endpoints = append(out.Endpoints, discoveryv1.Endpoint{
			Addresses:  e.Addresses,
			Conditions: e.Conditions,
			Hostname:   e.Hostname,
			Zone:       e.Zone,
		})
	}
	return out
}

// ImportedName is imported-<cluster>-<slice>, shortened with a hash of the
// whole when it would pass the 253 characters an object name may have.
func ImportedName(cluster, slice string) string {
	name := api.ImportedPrefix + cluster + "-" + slice
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	head := strings.TrimRight(name[:validation.DNS1123SubdomainMaxLength-len(suffix)], ".-")
	return head + suffix
}
