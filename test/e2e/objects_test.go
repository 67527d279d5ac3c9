//go:build lab

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// ownManager manages the tests' own slices: not kube-controller-manager's
// name, so that it leaves them alone (the Services have no selector).
const ownManager = "e2e.coredns-mcs.io"

// fixture writes the objects of one test into a fresh namespace of the
// cluster coredns watches: member1, unless a test says otherwise.
type fixture struct {
	t       *testing.T
	lab     *labtest.Lab
	cluster string
	ns      string
}

func newFixture(t *testing.T) *fixture { return newFixtureIn(t, labtest.Member1) }

func newFixtureIn(t *testing.T, cluster string) *fixture {
	t.Helper()
	lab := labtest.Get(t)
	return &fixture{t: t, lab: lab, cluster: cluster, ns: lab.Namespace(t, cluster)}
}

func (f *fixture) apply(objs ...runtime.Object) {
	f.t.Helper()
	f.lab.Apply(f.t, f.cluster, objs...)
}

// native is labels... <ns>.svc.cluster.local.
func (f *fixture) native(labels ...string) string { return f.fqdn("cluster.local.", labels) }

// clusterset is labels... <ns>.svc.clusterset.local.
func (f *fixture) clusterset(labels ...string) string { return f.fqdn("clusterset.local.", labels) }

func (f *fixture) fqdn(zone string, labels []string) string {
	return strings.Join(append(labels, f.ns, "svc", zone), ".")
}

// Every Service and import has these ports; slices have their targets,
// the same numbers: answers of pod addresses are right only for pods that
// listen on the service's ports (plugin/mcs/README.md, Ports).
var (
	servicePorts = []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
	}
	importPorts = []mcsv1beta1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
	}
	slicePorts = []discoveryv1.EndpointPort{
		{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)},
		{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](53)},
	}
)

// service is a selector-less Service: kube-controller-manager writes no
// slices for it, the tests do.
func (f *fixture) service(name string, headless bool) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       corev1.ServiceSpec{Ports: servicePorts},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return svc
}

// derivedService is the derived-<name> Service mcs-controller writes for
// an import: the kubernetes plugin holds it, and knows by it that name is
// imported.
func (f *fixture) derivedService(name string, headless bool) *corev1.Service {
	svc := f.service(api.DerivedPrefix+name, headless)
	svc.Labels = map[string]string{api.LabelManagedBy: api.ManagedBy}
	return svc
}

// clusterIP is the address the API server gave Service name.
func (f *fixture) clusterIP(name string) string {
	f.t.Helper()
	svc, err := f.lab.Client(f.t, f.cluster).CoreV1().Services(f.ns).Get(f.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return svc.Spec.ClusterIP
}

// endpoint is one address of a slice.
type endpoint struct {
	ip, host string
	ready    *bool // nil: the condition is unset, which counts as ready
}

func ep(ip string) endpoint                   { return endpoint{ip: ip, ready: ptr.To(true)} }
func (e endpoint) named(host string) endpoint { e.host = host; return e }
func (e endpoint) unready() endpoint          { e.ready = ptr.To(false); return e }
func (e endpoint) readyUnset() endpoint       { e.ready = nil; return e }

// unready is eps, none of them ready.
func unready(eps ...endpoint) []endpoint {
	out := make([]endpoint, 0, len(eps))
	for _, e := range eps {
		out = append(out, e.unready())
	}
	return out
}

// ownSlice is member1's own slice of Service svc.
func (f *fixture) ownSlice(svc string, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := f.slice(svc, eps)
	s.Labels = map[string]string{
		discoveryv1.LabelServiceName: svc,
		discoveryv1.LabelManagedBy:   ownManager,
	}
	return s
}

// importedSlice is a slice of svc imported from cluster, as the controller
// writes it.
func (f *fixture) importedSlice(svc, cluster string, eps ...endpoint) *discoveryv1.EndpointSlice {
	s := f.slice(svc, eps)
	s.Name = api.ImportedPrefix + cluster + "-" + s.Name
	s.Labels = map[string]string{
		mcsv1beta1.LabelServiceName:   svc,
		mcsv1beta1.LabelSourceCluster: cluster,
		discoveryv1.LabelServiceName:  api.DerivedPrefix + svc,
		discoveryv1.LabelManagedBy:    api.ManagedBy,
	}
	s.Annotations = map[string]string{api.AnnotationSourceGeneration: "1"}
	return s
}

// slice holds eps, which are of one address family; its name is
// <svc>-<family>.
func (f *fixture) slice(svc string, eps []endpoint) *discoveryv1.EndpointSlice {
	family := discoveryv1.AddressTypeIPv4
	if len(eps) > 0 && strings.Contains(eps[0].ip, ":") {
		family = discoveryv1.AddressTypeIPv6
	}
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: f.ns, Name: svc + "-" + strings.ToLower(string(family))},
		AddressType: family,
		Ports:       slicePorts,
	}
	for _, e := range eps {
		out := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.host != "" {
			out.Hostname = ptr.To(e.host)
		}
		s.Endpoints = append(s.Endpoints, out)
	}
	return s
}

func (f *fixture) deleteSlice(s *discoveryv1.EndpointSlice) {
	f.t.Helper()
	err := f.lab.Client(f.t, f.cluster).DiscoveryV1().EndpointSlices(f.ns).Delete(f.t.Context(), s.Name, metav1.DeleteOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) deleteImport(name string) {
	f.t.Helper()
	gvr := mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")
	err := f.lab.Dynamic(f.t, f.cluster).Resource(gvr).Namespace(f.ns).Delete(f.t.Context(), name, metav1.DeleteOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
}

// importSpec says what a ServiceImport holds beyond its ports.
type importSpec struct {
	headless bool
	strategy string   // the strategy annotation; "" for none
	ips      []string // spec.ips, the clusterset VIPs
}

func (f *fixture) serviceImport(name string, spec importSpec) *mcsv1beta1.ServiceImport {
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: importPorts, IPs: spec.ips},
	}
	if spec.headless {
		imp.Spec.Type = mcsv1beta1.Headless
	}
	if spec.strategy != "" {
		imp.Annotations = map[string]string{api.AnnotationStrategy: spec.strategy}
	}
	return imp
}

// lease writes the Lease source-<cluster> in mcs-system, renewed at
// renewed for seconds, and deletes it when the test ends.
func (f *fixture) lease(cluster string, renewed time.Time, seconds int32) {
	f.t.Helper()
	name := api.LeasePrefix + cluster
	f.apply(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: api.LeaseNamespace, Name: name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(api.ManagedBy),
			RenewTime:            &metav1.MicroTime{Time: renewed},
			LeaseDurationSeconds: ptr.To(seconds),
		},
	})
	client := f.lab.Client(f.t, f.cluster)
	f.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err := client.CoordinationV1().Leases(api.LeaseNamespace).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			f.t.Errorf("deleting Lease %s: %v", name, err)
		}
	})
}
