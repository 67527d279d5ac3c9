package main

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
)

// The objects a consumption cluster holds that the fixture leaves out, a
// few of each, so that the answer comparison (answers.go) asks every kind
// of name the kubernetes plugin answers from what the controller writes:
//   - derived-svc-<i>, the ClusterIP Service of the first derivedServices
//     ClusterSetIP imports;
//   - headlessImports headless imports headless-<i>, with their headless
//     derived-headless-<i> and an imported slice per source cluster, one
//     endpoint of each with a hostname, as a StatefulSet's has;
//   - a service this cluster exports and imports back, self-0: its own
//     Service and slice, and imported slices from this cluster (the same
//     addresses) and from remote-1, with derived-self-0.
//
// Their addresses are in 10.30.0.0/16, outside the fixture's blocks.
const (
	derivedServices  = 20
	headlessImports  = 3
	extraEndpoints   = 3
	selfService      = "self-0"
	extraManagedBy   = "bench.coredns-mcs.io"
	headlessHostname = "web-0"
)

// extrasCount is how many objects ensureExtras writes into an empty
// namespace.
func extrasCount(o options) int {
	return min(derivedServices, o.services) + headlessImports*(2+o.clusters) + 6
}

func headlessName(i int) string { return "headless-" + strconv.Itoa(i) }

// ensureExtras writes the objects above that are missing, and returns how
// many it wrote.
func (w *world) ensureExtras(ctx context.Context) (int, error) {
	n := 0
	for i := range min(derivedServices, w.opts.services) {
		k, err := w.createIfMissing(ctx, derivedService(w.opts.namespace, benchfixture.ServiceName(i), false))
		if n += k; err != nil {
			return n, err
		}
	}
	for i := range headlessImports {
		k, err := w.ensureHeadless(ctx, i)
		if n += k; err != nil {
			return n, err
		}
	}
	k, err := w.ensureSelf(ctx)
	return n + k, err
}

func (w *world) ensureHeadless(ctx context.Context, i int) (int, error) {
	ns, name := w.opts.namespace, headlessName(i)
	objs := []any{importOf(ns, name, mcsv1b1.Headless), derivedService(ns, name, true)}
	for c := range w.opts.clusters {
		var ips []string
		for j := range extraEndpoints {
			ips = append(ips, fmt.Sprintf("10.30.%d.%d", c, i*extraEndpoints+j+1))
		}
		s := importedSlice(ns, benchfixture.ClusterName(c), name, ips)
		s.Endpoints[0].Hostname = ptr.To(headlessHostname)
		objs = append(objs, s)
	}
	return w.createAll(ctx, objs)
}

func (w *world) ensureSelf(ctx context.Context) (int, error) {
	ns, local := w.opts.namespace, []string{"10.30.200.1", "10.30.200.2"}
	own := failoverSlice(ns, selfService+"-local", local, len(local), map[string]string{
		discoveryv1.LabelServiceName: selfService,
		discoveryv1.LabelManagedBy:   extraManagedBy,
	})
	objs := []any{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: selfService, Namespace: ns}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: servicePorts}},
		own, importOf(ns, selfService, mcsv1b1.ClusterSetIP), derivedService(ns, selfService, false),
		importedSlice(ns, w.opts.context, selfService, local),
		importedSlice(ns, benchfixture.ClusterName(0), selfService, []string{"10.30.200.11"}),
	}
	return w.createAll(ctx, objs)
}

// importOf is a ServiceImport as the controller writes it; a ClusterSetIP
// one gets an address of the block above.
func importOf(ns, name string, t mcsv1b1.ServiceImportType) *mcsv1b1.ServiceImport {
	si := &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       mcsv1b1.ServiceImportSpec{Type: t, Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if t == mcsv1b1.ClusterSetIP {
		si.Spec.IPs = []string{"10.30.201.1"}
	}
	return si
}

// derivedService is derived-<name> as the controller writes it:
// selector-less, labelled with its service, headless when the import is.
func derivedService(ns, name string, headless bool) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: api.DerivedPrefix + name, Namespace: ns, Labels: map[string]string{
			api.LabelManagedBy: api.ManagedBy, mcsv1b1.LabelServiceName: name,
		}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: servicePorts},
	}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

// importedSlice is cluster's slice of name as the controller writes it.
func importedSlice(ns, cluster, name string, ips []string) *discoveryv1.EndpointSlice {
	return failoverSlice(ns, api.ImportedPrefix+cluster+"-"+name, ips, len(ips), map[string]string{
		mcsv1b1.LabelServiceName:     name,
		mcsv1b1.LabelSourceCluster:   cluster,
		discoveryv1.LabelServiceName: api.DerivedPrefix + name,
		discoveryv1.LabelManagedBy:   api.ManagedBy,
	})
}

// createAll creates each object that does not exist yet, and says how many
// it created.
func (w *world) createAll(ctx context.Context, objs []any) (int, error) {
	n := 0
	for _, o := range objs {
		k, err := w.createIfMissing(ctx, o)
		if n += k; err != nil {
			return n, err
		}
	}
	return n, nil
}

func (w *world) createIfMissing(ctx context.Context, obj any) (int, error) {
	var err error
	var what string
	switch o := obj.(type) {
	case *corev1.Service:
		what = "service " + o.Name
		_, err = w.kube.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *discoveryv1.EndpointSlice:
		what = "endpointslice " + o.Name
		_, err = w.kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	case *mcsv1b1.ServiceImport:
		what = "serviceimport " + o.Name
		_, err = w.mcs.MulticlusterV1beta1().ServiceImports(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
	default:
		return 0, fmt.Errorf("no way to create %T", obj)
	}
	if err == nil {
		return 1, nil
	}
	if err = ignoreExists(err); err != nil {
		return 0, fmt.Errorf("creating %s: %w", what, err)
	}
	return 0, nil
}
