// Package benchfixture is the shape of the DNS benchmark's imported
// services (test/bench/README.md, What it does): the benchmark writes them
// into a lab cluster, and the plugin's memory benchmark (plugin/mcs,
// BenchmarkIndexMemory) decodes them as its informers would, so the two
// measure the same objects.
package benchfixture

import (
	"encoding/binary"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Addresses: the ServiceImport of service i has the clusterset IP
// 10.32.0.0 + i; source cluster c's endpoints come from 10.64.0.0 + c·2^18.
const (
	ClustersetIPBase       = 10<<24 | 32<<16
	EndpointIPBase         = 10<<24 | 64<<16
	MaxEndpointsPerCluster = 1 << 18
	MaxClusters            = 16
)

// ServiceName is imported service i's name.
func ServiceName(i int) string { return "svc-" + strconv.Itoa(i) }

// DerivedName is the Service the imported slices of service i belong to.
func DerivedName(i int) string { return api.DerivedPrefix + ServiceName(i) }

// ClusterName is source cluster c's name; none is the lab's.
func ClusterName(c int) string { return "remote-" + strconv.Itoa(c+1) }

// SliceName is the slice service i imports from source cluster c.
func SliceName(c, i int) string { return api.ImportedPrefix + ClusterName(c) + "-" + ServiceName(i) }

// ImportIP is service i's clusterset IP, the import's spec.ips: mcs's
// native answer, and every clusterset answer.
func ImportIP(i int) string { return IPv4(ClustersetIPBase + i) }

// IPv4 is the dotted form of n.
func IPv4(n int) string {
	ip := make(net.IP, net.IPv4len)
	binary.BigEndian.PutUint32(ip, uint32(n)) // #nosec G115 -- bounded by the benchmark's flags
	return ip.String()
}

// Import is service i's ServiceImport, annotated RemoteAndLocal so that mcs
// answers its native name.
func Import(namespace string, i int) *mcsv1b1.ServiceImport {
	return &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ServiceName(i),
			Namespace:   namespace,
			Annotations: map[string]string{api.AnnotationStrategy: string(api.RemoteAndLocal)},
		},
		Spec: mcsv1b1.ServiceImportSpec{
			Type:  mcsv1b1.ClusterSetIP,
			IPs:   []string{ImportIP(i)},
			Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
}

// Slice is the slice service i imports from source cluster c, as the
// controller writes it: endpoints ready endpoints with distinct addresses.
func Slice(namespace string, c, i, endpoints int) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      SliceName(c, i),
			Namespace: namespace,
			Labels: map[string]string{
				mcsv1b1.LabelServiceName:     ServiceName(i),
				mcsv1b1.LabelSourceCluster:   ClusterName(c),
				discoveryv1.LabelServiceName: DerivedName(i),
				discoveryv1.LabelManagedBy:   api.ManagedBy,
			},
			Annotations: map[string]string{api.AnnotationSourceGeneration: "1"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
	}
	for j := range endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{IPv4(EndpointIPBase + c*MaxEndpointsPerCluster + i*endpoints + j)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return s
}
