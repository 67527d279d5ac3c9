package main

import (
	"context"
	"fmt"
	"log"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The ceiling: what the consumer's API server takes of the writes an initial
// sync makes, without the controller. Per service the four writes that are
// the floor of an import (README.md, Performance): derived Service,
// ServiceImport, its status, the imported slice, one after the other, with
// -ceiling-in-flight services at once, into a namespace of their own in
// member2. The initial sync is reported as a fraction of the best of them.

// ceilingLevel is one plain write load.
type ceilingLevel struct {
	inFlight, services, writes int
	took                       time.Duration
	api                        []apiPhase
}

func (l ceilingLevel) perSecond() float64 { return float64(l.writes) / l.took.Seconds() }

func (w *world) ceilingNamespace() string { return w.opts.namespace + "-ceiling" }

// ceiling runs a plain write load at each -ceiling-in-flight.
func (w *world) ceiling(ctx context.Context) ([]ceilingLevel, error) {
	ns := w.ceilingNamespace()
	if err := w.ensureNamespace(ctx, consumerCluster, ns); err != nil {
		return nil, err
	}
	mcs, err := mcsclient.NewForConfig(w.configs[consumerCluster])
	if err != nil {
		return nil, err
	}
	var out []ceilingLevel
	for _, k := range w.opts.ceilingInFlight {
		l := ceilingLevel{inFlight: k, services: w.opts.ceilingServices, writes: 4 * w.opts.ceilingServices}
		log.Printf("ceiling: %d writes into %s/%s, %d services at once", l.writes, consumerCluster, ns, k)
		sampler := w.sampleAPIServers(ctx, []string{consumerCluster}, ceilingSampleEvery)
		start := time.Now()
		err := forEach(ctx, k, l.services, func(ctx context.Context, i int) error {
			return w.importPlainly(ctx, mcs, ns, fmt.Sprintf("c%d-%s", k, serviceName(i)), i)
		})
		l.took, l.api = time.Since(start), sampler.stop(ctx)
		if err != nil {
			return out, fmt.Errorf("ceiling at %d in flight: %w", k, err)
		}
		out = append(out, l)
	}
	return out, nil
}

// importPlainly writes what the controller writes for one import, as
// plainly as it can be written.
func (w *world) importPlainly(ctx context.Context, mcs mcsclient.Interface, ns, name string, i int) error {
	labels := map[string]string{api.LabelManagedBy: benchManagedBy}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: api.DerivedPrefix + name, Namespace: ns, Labels: labels},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if w.opts.headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	svc, err := w.clients[consumerCluster].CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	imp := &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: mcsv1b1.ServiceImportSpec{
			Type: mcsv1b1.ClusterSetIP, IPs: svc.Spec.ClusterIPs,
			Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	if w.opts.headless {
		imp.Spec.Type, imp.Spec.IPs = mcsv1b1.Headless, nil
	}
	if imp, err = mcs.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, imp, metav1.CreateOptions{}); err != nil {
		return err
	}
	imp.Status.Clusters = []mcsv1b1.ClusterStatus{{Cluster: providerCluster}}
	if _, err := mcs.MulticlusterV1beta1().ServiceImports(ns).UpdateStatus(ctx, imp, metav1.UpdateOptions{}); err != nil {
		return err
	}
	slice := w.sourceSlice(i, 0)
	slice.ObjectMeta = metav1.ObjectMeta{Name: api.ImportedPrefix + providerCluster + "-" + name, Namespace: ns, Labels: map[string]string{
		discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: benchManagedBy,
		mcsv1b1.LabelServiceName: name, mcsv1b1.LabelSourceCluster: providerCluster,
	}}
	_, err = w.clients[consumerCluster].DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{})
	return err
}
