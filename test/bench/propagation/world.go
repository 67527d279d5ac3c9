package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/deploy/crds"
)

// benchManagedBy marks what this benchmark writes: the namespaces (only
// those are ever deleted) and the source EndpointSlices, whose
// endpointslice.kubernetes.io/managed-by must not be the controller's, or it
// would never collect them.
const benchManagedBy = "propagation-bench.coredns-mcs.io"

// The address plan: endpoint 0 of service i at version v is
// 10.(64+v mod 64).(i/256).(i mod 256), and moves with each change; endpoint
// j ≥ 1 stays at 10.(128+j).(i/256).(i mod 256).
const (
	maxServices  = 1 << 16
	maxEndpoints = 64
	versions     = 64
)

func address(i, j, v int) netip.Addr {
	second := 128 + j
	if j == 0 {
		second = 64 + v%versions
	}
	return netip.AddrFrom4([4]byte{10, byte(second), byte(i >> 8), byte(i)}) // #nosec G115 -- bounded by validate
}

// versionOf is the version of endpoint 0's address of service i.
func versionOf(addr string, i int) (int, bool) {
	a, err := netip.ParseAddr(addr)
	if err != nil || !a.Is4() {
		return 0, false
	}
	b := a.As4()
	if b[0] != 10 || b[1] < 64 || b[1] >= 64+versions || b[2] != byte(i>>8) || b[3] != byte(i) { // #nosec G115
		return 0, false
	}
	return int(b[1]) - 64, true
}

func serviceName(i int) string { return fmt.Sprintf("svc-%d", i) }

// importedName is the imported copy of service i's source slice, which has
// the service's name.
func importedName(i int) string { return api.ImportedPrefix + providerCluster + "-" + serviceName(i) }

// world is the benchmark's objects: per service svc-<i> a selector-less
// Service and a source EndpointSlice in the provider, and a
// MultiClusterService on the hub.
type world struct {
	opts    options
	clients map[string]kubernetes.Interface // by cluster
	configs map[string]*rest.Config
	hubDyn  dynamic.Interface

	// By service: the source slice as last written, and its version.
	sources  []*discoveryv1.EndpointSlice
	versions []int
}

func newWorld(o options) (*world, error) {
	w := &world{opts: o, clients: map[string]kubernetes.Interface{}, configs: map[string]*rest.Config{}, sources: make([]*discoveryv1.EndpointSlice, o.services), versions: make([]int, o.services)}
	for _, c := range w.clusters() {
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: c}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s, context %s: %w", o.kubeconfig, c, err)
		}
		// Thousands of writes, and a burst that must not be paced by
		// client-go's default of 5 per second.
		rc.QPS, rc.Burst, rc.UserAgent = 2000, 4000, "coredns-mcs-propagation-bench"
		w.configs[c] = rc
		// The benchmark shares the cores with what it measures: built-in
		// types cost the API servers and it less as protobuf. Custom
		// resources speak JSON only.
		kubeRC := rest.CopyConfig(rc)
		kubeRC.ContentType = runtime.ContentTypeProtobuf
		if w.clients[c], err = kubernetes.NewForConfig(kubeRC); err != nil {
			return nil, err
		}
		if c == hubCluster {
			if w.hubDyn, err = dynamic.NewForConfig(rc); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// clusters are every cluster the benchmark writes to; members those the
// controller is given.
func (w *world) clusters() []string { return append([]string{hubCluster}, w.members()...) }

// members are every member the benchmark uses, the one that joins too.
func (w *world) members() []string {
	out := append([]string{providerCluster}, w.opts.consumers...)
	if w.opts.join != "" {
		out = append(out, w.opts.join)
	}
	return out
}

// startMembers are the members the controller is given at its start.
func (w *world) startMembers() []string {
	return append([]string{providerCluster}, w.opts.consumers...)
}

// consumers are the consumption clusters, before or after the join: with
// -join, every member, member1 taking its own back too.
func (w *world) consumers(joined bool) []string {
	switch {
	case w.opts.join == "":
		return w.opts.consumers
	case joined:
		return append(w.startMembers(), w.opts.join)
	}
	return w.startMembers()
}

// forEach calls fn for 0..n-1 from at most workers goroutines and returns
// the first error; it hands out no more after one.
func forEach(ctx context.Context, workers, n int, fn func(ctx context.Context, i int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(gctx, i) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// objectCounts says what ensure found and wrote, and how long it took.
type objectCounts struct {
	total, written int
	took           time.Duration
}

// present is what the namespaces already hold, by service name.
type present struct {
	services, mcs map[string]bool
	slices        map[string]*discoveryv1.EndpointSlice
}

// ensure writes every object that is not there yet, or not as it should be,
// with -workers writers in parallel: a rerun over kept objects writes none.
func (w *world) ensure(ctx context.Context) (objectCounts, error) {
	start := time.Now()
	if err := w.ensureCRD(ctx); err != nil {
		return objectCounts{}, err
	}
	for _, c := range w.clusters() {
		if err := w.ensureNamespace(ctx, c, w.opts.namespace); err != nil {
			return objectCounts{}, err
		}
	}
	have, err := w.list(ctx)
	if err != nil {
		return objectCounts{}, err
	}
	var written atomic.Int64
	err = forEach(ctx, w.opts.workers, w.opts.services, func(ctx context.Context, i int) error {
		return onTransient(func() error {
			k, err := w.ensureService(ctx, have, i)
			written.Add(int64(k))
			return err
		})
	})
	counts := objectCounts{total: 3 * w.opts.services, written: int(written.Load()), took: time.Since(start)}
	if err != nil {
		return counts, err
	}
	log.Printf("%d objects in namespace %s, %d written in %s", counts.total, w.opts.namespace, counts.written, counts.took.Round(time.Second))
	return counts, nil
}

// ensureCRD installs the MultiClusterService CRD of deploy/crds on the hub
// when it lacks it, as an operator does, and waits until it is Established.
func (w *world) ensureCRD(ctx context.Context) error {
	gvr := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(crds.MultiClusterService, &crd.Object); err != nil {
		return fmt.Errorf("deploy/crds: %w", err)
	}
	client := w.hubDyn.Resource(gvr)
	_, err := client.Create(ctx, crd, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("installing CRD %s on the hub: %w", crd.GetName(), err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := client.Get(ctx, crd.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		return slices.ContainsFunc(conds, func(c any) bool {
			m, ok := c.(map[string]any)
			return ok && m["type"] == "Established" && m["status"] == "True"
		}), nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s on the hub is not Established: %w", crd.GetName(), err)
	}
	return nil
}

// namespaceTimeout bounds waiting for a namespace of an earlier run to go.
const namespaceTimeout = 5 * time.Minute

// ensureNamespace creates namespace name in cluster, labelled as this
// benchmark's, after waiting for one of an earlier run to finish
// terminating. A namespace of the same name that this benchmark did not make
// is an error: it would be deleted at the end.
func (w *world) ensureNamespace(ctx context.Context, cluster, name string) error {
	nss := w.clients[cluster].CoreV1().Namespaces()
	err := wait.PollUntilContextTimeout(ctx, time.Second, namespaceTimeout, true, func(ctx context.Context) (bool, error) {
		ns, err := nss.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{api.LabelManagedBy: benchManagedBy}}}
			_, err = nss.Create(ctx, ns, metav1.CreateOptions{})
			return err == nil, ignoreExists(err)
		case err != nil:
			return false, err
		case ns.Labels[api.LabelManagedBy] != benchManagedBy:
			return false, fmt.Errorf("it exists and was not made by this benchmark (no label %s=%s): pick another -namespace", api.LabelManagedBy, benchManagedBy)
		}
		return ns.DeletionTimestamp == nil, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s in %s: %w", name, cluster, err)
	}
	return nil
}

// list reads what the namespaces hold already.
func (w *world) list(ctx context.Context) (*present, error) {
	ns := w.opts.namespace
	have := &present{services: map[string]bool{}, mcs: map[string]bool{}, slices: map[string]*discoveryv1.EndpointSlice{}}
	svcs, err := w.clients[providerCluster].CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing services in %s/%s: %w", providerCluster, ns, err)
	}
	for _, s := range svcs.Items {
		have.services[s.Name] = true
	}
	eps, err := w.clients[providerCluster].DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + benchManagedBy})
	if err != nil {
		return nil, fmt.Errorf("listing endpointslices in %s/%s: %w", providerCluster, ns, err)
	}
	for i := range eps.Items {
		have.slices[eps.Items[i].Name] = &eps.Items[i]
	}
	mcs, err := w.hubDyn.Resource(v1alpha1.MultiClusterServiceResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing multiclusterservices in %s/%s: %w", hubCluster, ns, err)
	}
	for _, m := range mcs.Items {
		have.mcs[m.GetName()] = true
	}
	return have, nil
}

// ensureService writes what service i lacks and returns how many objects it
// wrote. A kept source slice is adopted at its version, and rewritten when
// its endpoints are not the plan's (another -endpoints).
func (w *world) ensureService(ctx context.Context, have *present, i int) (int, error) {
	name, written := serviceName(i), 0
	if !have.services[name] {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.opts.namespace},
			Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		}
		if w.opts.headless {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		if _, err := w.clients[providerCluster].CoreV1().Services(w.opts.namespace).Create(ctx, svc, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return written, fmt.Errorf("creating service %s/%s in %s: %w", w.opts.namespace, name, providerCluster, err)
		}
		written++
	}
	if err := w.ensureSlice(ctx, have.slices[name], i, &written); err != nil {
		return written, err
	}
	if !have.mcs[name] {
		if err := w.createMCS(ctx, name); err != nil {
			return written, err
		}
		written++
	}
	return written, nil
}

func (w *world) ensureSlice(ctx context.Context, have *discoveryv1.EndpointSlice, i int, written *int) error {
	client := w.clients[providerCluster].DiscoveryV1().EndpointSlices(w.opts.namespace)
	if have == nil {
		s, err := client.Create(ctx, w.sourceSlice(i, 0), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) { // created by an attempt that failed later
			if have, err = client.Get(ctx, serviceName(i), metav1.GetOptions{}); err == nil {
				return w.ensureSlice(ctx, have, i, written)
			}
		}
		if err != nil {
			return fmt.Errorf("creating endpointslice %s/%s in %s: %w", w.opts.namespace, serviceName(i), providerCluster, err)
		}
		w.sources[i] = s
		*written++
		return nil
	}
	w.sources[i] = have
	v := 0
	if len(have.Endpoints) > 0 && len(have.Endpoints[0].Addresses) == 1 {
		v, _ = versionOf(have.Endpoints[0].Addresses[0], i)
	}
	w.versions[i] = v
	if answerOf(readyAddresses(have)) == answerOf(w.addresses(i, v)) {
		return nil
	}
	*written++
	_, err := w.setVersion(ctx, i, v)
	return err
}

// addresses are service i's endpoint addresses at version v.
func (w *world) addresses(i, v int) []string {
	out := make([]string, w.opts.endpoints)
	for j := range out {
		out[j] = address(i, j, v).String()
	}
	return out
}

// sourceSlice is service i's EndpointSlice at version v: ready endpoints,
// named after the service, labelled as the benchmark's.
func (w *world) sourceSlice(i, v int) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:      serviceName(i),
			Namespace: w.opts.namespace,
			Labels:    map[string]string{discoveryv1.LabelServiceName: serviceName(i), discoveryv1.LabelManagedBy: benchManagedBy},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
		Endpoints:   w.endpoints(i, v),
	}
}

func (w *world) endpoints(i, v int) []discoveryv1.Endpoint {
	var out []discoveryv1.Endpoint
	for _, a := range w.addresses(i, v) {
		out = append(out, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return out
}

// setVersion updates service i's source slice to version v and returns when
// the API server acknowledged it. Calls for different services may run in
// parallel.
func (w *world) setVersion(ctx context.Context, i, v int) (time.Time, error) {
	s := w.sources[i].DeepCopy()
	s.Endpoints = w.endpoints(i, v)
	var got *discoveryv1.EndpointSlice
	var ack time.Time
	err := onTransient(func() (err error) {
		got, err = w.clients[providerCluster].DiscoveryV1().EndpointSlices(w.opts.namespace).Update(ctx, s, metav1.UpdateOptions{})
		ack = time.Now()
		return err
	})
	if err != nil {
		return ack, fmt.Errorf("updating endpointslice %s/%s in %s: %w", s.Namespace, s.Name, providerCluster, err)
	}
	w.sources[i], w.versions[i] = got, v
	return ack, nil
}

// createMCS asks for service name's endpoints of member1 in the consumers, with
// native names (RemoteAndLocal), so that coredns-mcs answers
// svc-<i>.<namespace>.svc.cluster.local.
func (w *world) createMCS(ctx context.Context, name string) error {
	m := &v1alpha1.MultiClusterService{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "MultiClusterService"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.opts.namespace},
		Spec: v1alpha1.MultiClusterServiceSpec{
			Types:                      []v1alpha1.ExposureType{v1alpha1.CrossCluster},
			ServiceProvisionClusters:   []v1alpha1.ClusterName{providerCluster},
			ServiceConsumptionClusters: w.consumptionClusters(),
			Strategy:                   api.RemoteAndLocal,
		},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return err
	}
	_, err = w.hubDyn.Resource(v1alpha1.MultiClusterServiceResource).Namespace(w.opts.namespace).Create(ctx, &unstructured.Unstructured{Object: content}, metav1.CreateOptions{})
	if ignoreExists(err) != nil {
		return fmt.Errorf("creating multiclusterservice %s/%s on the hub: %w", w.opts.namespace, name, err)
	}
	return nil
}

// finalizerTimeout bounds the wait for the controller to remove the
// MultiClusterServices' finalizers.
const finalizerTimeout = 3 * time.Minute

// cleanup deletes every object of the run: the MultiClusterServices first,
// while the controller runs, so that their finalizers remove what it wrote
// into the consumers; then, with the processes stopped, the Services (in
// parallel: the namespace controller deletes them one at a time, slowly in
// the lab) and the namespaces.
func (w *world) cleanup(procs *processes) error {
	ctx, cancel := context.WithTimeout(context.Background(), w.opts.cleanupTimeout)
	defer cancel()
	procs.stopCoreDNS()
	err := w.deleteMCS(ctx, procs)
	procs.stopAll()
	err = errors.Join(err, w.deleteMemberSecret(ctx))
	for _, c := range w.members() {
		err = errors.Join(err, w.deleteServices(ctx, c, w.opts.namespace))
	}
	err = errors.Join(err, w.deleteServices(ctx, consumerCluster, w.ceilingNamespace()))
	for _, c := range w.clusters() {
		err = errors.Join(err, w.deleteNamespace(ctx, c, w.opts.namespace))
	}
	err = errors.Join(err, w.deleteNamespace(ctx, consumerCluster, w.ceilingNamespace()))
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	log.Printf("deleted the objects; the namespaces %s terminate in the background", w.opts.namespace)
	return nil
}

// deleteMCS deletes the MultiClusterServices and waits until the
// controller has removed their finalizers. Should it be gone or too slow,
// the finalizers are removed here: what it wrote into the consumers then
// goes with their namespaces.
func (w *world) deleteMCS(ctx context.Context, procs *processes) error {
	client := w.hubDyn.Resource(v1alpha1.MultiClusterServiceResource).Namespace(w.opts.namespace)
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing multiclusterservices on the hub: %w", err)
	}
	names := make([]string, 0, len(list.Items))
	for _, m := range list.Items {
		names = append(names, m.GetName())
	}
	log.Printf("deleting %d multiclusterservices", len(names))
	err = forEach(ctx, w.opts.workers, len(names), func(ctx context.Context, i int) error {
		return ignoreNotFound(client.Delete(ctx, names[i], metav1.DeleteOptions{}))
	})
	if err != nil {
		return fmt.Errorf("deleting multiclusterservices on the hub: %w", err)
	}
	var left []unstructured.Unstructured
	_ = wait.PollUntilContextTimeout(ctx, time.Second, finalizerTimeout, true, func(ctx context.Context) (bool, error) {
		l, err := client.List(ctx, metav1.ListOptions{})
		if err == nil {
			left = l.Items
		}
		return err == nil && len(left) == 0 || procs.controllerGone(), nil
	})
	if len(left) == 0 {
		log.Printf("the controller removed what they caused")
		return nil
	}
	log.Printf("%d multiclusterservices still have the controller's finalizer: removing it", len(left))
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	return forEach(ctx, w.opts.workers, len(left), func(ctx context.Context, i int) error {
		_, err := client.Patch(ctx, left[i].GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
		return ignoreNotFound(err)
	})
}

func (w *world) deleteServices(ctx context.Context, cluster, namespace string) error {
	services := w.clients[cluster].CoreV1().Services(namespace)
	list, err := services.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing services in %s/%s: %w", cluster, namespace, err)
	}
	return forEach(ctx, w.opts.workers, len(list.Items), func(ctx context.Context, i int) error {
		if err := services.Delete(ctx, list.Items[i].Name, metav1.DeleteOptions{}); ignoreNotFound(err) != nil {
			return fmt.Errorf("deleting service %s/%s in %s: %w", namespace, list.Items[i].Name, cluster, err)
		}
		return nil
	})
}

// deleteNamespace deletes namespace name in cluster if this benchmark made it.
func (w *world) deleteNamespace(ctx context.Context, cluster, name string) error {
	nss := w.clients[cluster].CoreV1().Namespaces()
	ns, err := nss.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || err == nil && ns.Labels[api.LabelManagedBy] != benchManagedBy {
		return nil
	}
	if err == nil {
		err = ignoreNotFound(nss.Delete(ctx, name, metav1.DeleteOptions{}))
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s in %s: %w", name, cluster, err)
	}
	return nil
}

// consumptionClusters are the MultiClusterServices' consumers: with -join,
// none named, so that the fleet's members are, as they join.
func (w *world) consumptionClusters() []v1alpha1.ClusterName {
	if w.opts.join != "" {
		return nil
	}
	return clusterNames(w.opts.consumers)
}

func clusterNames(names []string) []v1alpha1.ClusterName {
	out := make([]v1alpha1.ClusterName, len(names))
	for i, n := range names {
		out[i] = v1alpha1.ClusterName(n)
	}
	return out
}

// transientBackoff spans about a minute and a half: an API server of the
// lab restarting, as the fault tests make them.
var transientBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Steps: 12, Cap: 10 * time.Second}

// onTransient runs fn again while the API server refuses connections or
// says it cannot serve yet; a write that reached it is not repeated.
func onTransient(fn func() error) error {
	return retry.OnError(transientBackoff, func(err error) bool {
		return utilnet.IsConnectionRefused(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTooManyRequests(err)
	}, fn)
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
