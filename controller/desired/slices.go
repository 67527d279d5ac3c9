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
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// importedSlices copies every source slice of the provision clusters that
// have the Service into the slice a consumption cluster gets, the first
// in.MaxEndpoints endpoints of each cluster at most.
func importedSlices(in *Input, clusters []string) (out []*discoveryv1.EndpointSlice, skipped []string) {
	var sources []string // the source slice of each of out
	for _, c := range clusters {
		left, cut := in.MaxEndpoints, 0
		for _, s := range in.Members[c].Slices {
			if s.AddressType == discoveryv1.AddressTypeFQDN {
				skipped = append(skipped, fmt.Sprintf("%s: EndpointSlice %s has address type FQDN, which a Service cannot route to", c, s.Name))
				continue
			}
			imp := Imported(c, in.Name, s)
			if in.MaxEndpoints > 0 {
				kept := min(left, len(imp.Endpoints))
				cut += len(imp.Endpoints) - kept
				imp.Endpoints, left = imp.Endpoints[:kept], left-kept
				if kept == 0 && len(s.Endpoints) > 0 {
					continue
				}
			}
			out = append(out, imp)
			sources = append(sources, s.Name)
		}
		if cut > 0 {
			skipped = append(skipped, fmt.Sprintf("%s: %d endpoints left out, past the %d imported from one cluster (mcs-controller --max-imported-endpoints)", c, cut, in.MaxEndpoints))
		}
	}
	return disambiguate(out, sources), skipped
}

// disambiguate renames imported slices whose names clash: cluster a's
// slice b-c and cluster a-b's slice c are both imported-a-b-c, and the
// controller would overwrite one with the other at every sync (a member
// that picks its slice names could shadow another's on purpose). Every
// claimant of a clashing name gets the name with a hash of its own cluster
// and slice instead; a second pass catches a plain name that happens to
// be such a hashed one.
func disambiguate(slices []*discoveryv1.EndpointSlice, sources []string) []*discoveryv1.EndpointSlice {
	for range 3 {
		claims := map[string]int{}
		for _, s := range slices {
			claims[s.Name]++
		}
		clash := false
		for i, s := range slices {
			if claims[s.Name] > 1 {
				s.Name = uniqueName(s.Labels[mcsv1b1.LabelSourceCluster], sources[i])
				clash = true
			}
		}
		if !clash {
			break
		}
	}
	return slices
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
				api.LabelBucket:              shards.Label(s.Namespace, svc),
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
	return withHash(name, name)
}

// uniqueName is imported-<cluster>-<slice> with a hash of the pair: two
// pairs that spell the same name get two names.
func uniqueName(cluster, slice string) string {
	return withHash(api.ImportedPrefix+cluster+"-"+slice, cluster+"/"+slice)
}

// withHash is name, cut to leave room, then "-" and ten hex digits of the
// hash of what.
func withHash(name, what string) string {
	sum := sha256.Sum256([]byte(what))
	suffix := "-" + hex.EncodeToString(sum[:])[:10]
	if len(name)+len(suffix) > validation.DNS1123SubdomainMaxLength {
		name = name[:validation.DNS1123SubdomainMaxLength-len(suffix)]
	}
	return strings.TrimRight(name, ".-") + suffix
}
