package desired

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// importedSlices copies every source slice of the provision clusters that
// have the Service into the slice a consumption cluster gets, the first
// in.MaxEndpoints endpoints of each cluster at most, each with the ports
// its cluster exposes as the import defines them (exposed).
func importedSlices(in *Input, imp *Import) (out []*discoveryv1.EndpointSlice, skipped []string) {
	var sources []string // the source slice of each of out
	for _, c := range imp.Clusters {
		left, cut := in.MaxEndpoints, 0
		for _, s := range in.Members[c].Slices {
			if s.AddressType == discoveryv1.AddressTypeFQDN {
				skipped = append(skipped, fmt.Sprintf("%s: EndpointSlice %s has address type FQDN, which a Service cannot route to", c, s.Name))
				continue
			}
			is := Imported(c, in.Name, s)
			is.Ports = exposed(in.Members[c].Service, imp.Ports, s.Ports)
			if in.MaxEndpoints > 0 {
				kept := min(left, len(is.Endpoints))
				cut += len(is.Endpoints) - kept
				is.Endpoints, left = is.Endpoints[:kept], left-kept
				if kept == 0 && len(s.Endpoints) > 0 {
					continue
				}
			}
			out = append(out, is)
			sources = append(sources, s.Name)
		}
		if cut > 0 {
			skipped = append(skipped, fmt.Sprintf("%s: %d endpoints left out, past the %d imported from one cluster (mcs-controller --max-imported-endpoints)", c, cut, in.MaxEndpoints))
		}
	}
	return disambiguate(out, sources), skipped
}

// exposed keeps of a source slice's ports those that carry a port of the
// import as the import defines it: a slice port is named after its
// Service's port, and kube-proxy routes a port of derived-<svc> to every
// imported slice port of that name, so a cluster whose Service lost a port
// conflict (KEP-1645: the oldest export's definition is the one exposed)
// would otherwise get that port's traffic. A cluster whose "tcp" is
// 4242/TCP (target port 42) has a slice port "tcp" 42, just like the
// older export whose "tcp" is 42/TCP and wins: it receives none of the
// import's "tcp". A slice port whose Service has no port of that name and
// protocol is dropped too. A slice left without ports keeps its endpoints:
// kube-proxy routes no port to them, and a headless import's A records,
// which read addresses, still answer them.
func exposed(svc *corev1.Service, imported []mcsv1b1.ServicePort, ports []discoveryv1.EndpointPort) []discoveryv1.EndpointPort {
	keep := func(p discoveryv1.EndpointPort) bool {
		name, protocol := ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, corev1.ProtocolTCP)
		i := slices.IndexFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool {
			return sp.Name == name && cmp.Or(sp.Protocol, corev1.ProtocolTCP) == protocol
		})
		return i >= 0 && slices.ContainsFunc(imported, func(ip mcsv1b1.ServicePort) bool {
			return ip.Name == name && ip.Protocol == protocol && ip.Port == svc.Spec.Ports[i].Port
		})
	}
	if !slices.ContainsFunc(ports, func(p discoveryv1.EndpointPort) bool { return !keep(p) }) {
		return ports
	}
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
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

// SliceLabels and SliceAnnotations are the keys of an imported slice's
// labels and annotations that the controller sets (Imported, stale.go):
// any other key is another's (a mutating webhook's), kept as it is.
var (
	SliceLabels = []string{
		mcsv1b1.LabelServiceName, mcsv1b1.LabelSourceCluster, discoveryv1.LabelServiceName, discoveryv1.LabelManagedBy, api.LabelBucket,
	}
	SliceAnnotations = []string{api.AnnotationSourceGeneration, api.AnnotationStale}
)

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
