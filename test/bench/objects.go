package main

import (
	"context"
	"fmt"
	"log"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/pager"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
)

// world is the benchmark's objects in one cluster: per service svc-<i> a
// ServiceImport annotated RemoteAndLocal, so that mcs answers its native
// name, and one imported EndpointSlice per source cluster; the first
// -native services also have a selector-less ClusterIP Service, whose
// native name the kubernetes plugin answers.
//
// ClusterIPs are costly in the lab: its apiserver recounts every allocated
// ClusterIP on each allocation and release (the allocator's metrics), so
// writing or deleting n Services takes O(n²), about 7 minutes for 10k. This
// is why only -native services have a Service, and why the derived-svc-<i>
// Services the controller would write are left out (the kubernetes plugin
// of both processes compared would hold them alike, and mcs does not read
// them); the imports' spec.ips come from a block of their own instead.
type world struct {
	opts options
	kube kubernetes.Interface
	mcs  mcsclient.Interface

	// Filled by ensure, indexed by service number.
	serviceIPs []string // ClusterIP of svc-<i>: the kubernetes plugin's native answer
	plainIPs   []string // ClusterIP of plain-<i>, a Service without import: mcs passes its name on
}

func newWorld(o options) (*world, error) {
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s, context %s: %w", o.kubeconfig, o.context, err)
	}
	// Tens of thousands of writes: client-go's default of 5 per second
	// would be what gets measured.
	rc.QPS, rc.Burst = 5000, 10000
	rc.UserAgent = "coredns-mcs-bench"
	kubeRC := rest.CopyConfig(rc)
	kubeRC.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(kubeRC)
	if err != nil {
		return nil, err
	}
	mc, err := mcsclient.NewForConfig(rc) // custom resources speak JSON only
	if err != nil {
		return nil, err
	}
	return &world{opts: o, kube: kube, mcs: mc}, nil
}

// plainName is a Service without an import: its name is an ordinary one.
func plainName(i int) string { return "plain-" + strconv.Itoa(i) }

func (w *world) serviceIP(i int) string { return w.serviceIPs[i] }

func (w *world) plainIP(i int) string { return w.plainIPs[i] }

// objectCounts says what ensure found and wrote, and how long writing took.
type objectCounts struct {
	total, created int
	took           time.Duration
}

// present is what the namespace already holds, by name.
type present struct {
	serviceIPs map[string]string // Service name → ClusterIP
	imports    map[string]bool
	slices     map[string]bool
}

// ensure writes every object the namespace does not hold yet, with
// -workers writers in parallel, so a rerun over kept objects is quick.
func (w *world) ensure(ctx context.Context) (objectCounts, error) {
	start := time.Now()
	if err := w.ensureNamespace(ctx); err != nil {
		return objectCounts{}, err
	}
	have, err := w.list(ctx)
	if err != nil {
		return objectCounts{}, err
	}
	n := w.opts.services
	w.serviceIPs = make([]string, w.opts.native)
	var created atomic.Int64
	err = parallel(ctx, w.opts.workers, n, newProgress("services written", n), func(i int) error {
		k, err := w.ensureService(ctx, have, i)
		created.Add(int64(k))
		return err
	})
	if err != nil {
		return objectCounts{}, err
	}
	w.plainIPs = make([]string, w.opts.plain)
	err = parallel(ctx, w.opts.workers, w.opts.plain, newProgress("plain services written", w.opts.plain), func(i int) error {
		ip, ok := have.serviceIPs[plainName(i)]
		if !ok {
			var err error
			if ip, err = w.createService(ctx, plainName(i)); err != nil {
				return err
			}
			created.Add(1)
		}
		w.plainIPs[i] = ip
		return nil
	})
	if err != nil {
		return objectCounts{}, err
	}
	extras, err := w.ensureExtras(ctx)
	if err != nil {
		return objectCounts{}, err
	}
	created.Add(int64(extras))
	counts := objectCounts{total: n*(1+w.opts.clusters) + w.opts.native + w.opts.plain + extrasCount(w.opts), created: int(created.Load()), took: time.Since(start)}
	log.Printf("%d objects in namespace %s, %d of them written in %s", counts.total, w.opts.namespace, counts.created, counts.took.Round(time.Second))
	return counts, nil
}

func (w *world) ensureNamespace(ctx context.Context) error {
	nss := w.kube.CoreV1().Namespaces()
	if ns, err := nss.Get(ctx, w.opts.namespace, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp != nil {
		log.Printf("namespace %s is being deleted: deleting its services to speed it up, then waiting", w.opts.namespace)
		if err := w.deleteServices(ctx); err != nil {
			return err
		}
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, deleteTimeout, true, func(ctx context.Context) (bool, error) {
		ns, err := nss.Get(ctx, w.opts.namespace, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.opts.namespace}}, metav1.CreateOptions{})
			return err == nil, ignoreExists(err)
		}
		return err == nil && ns.DeletionTimestamp == nil, err
	})
	if err != nil {
		return fmt.Errorf("namespace %s: %w", w.opts.namespace, err)
	}
	return nil
}

// list reads what the namespace holds, a page at a time.
func (w *world) list(ctx context.Context) (*present, error) {
	have := &present{serviceIPs: map[string]string{}, imports: map[string]bool{}, slices: map[string]bool{}}
	ns := w.opts.namespace
	lists := []struct {
		kind string
		list pager.ListPageFunc
		add  func(runtime.Object)
	}{
		{"services", w.listServices, func(obj runtime.Object) {
			s := obj.(*corev1.Service)
			have.serviceIPs[s.Name] = s.Spec.ClusterIP
		}},
		{"endpointslices", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return w.kube.DiscoveryV1().EndpointSlices(ns).List(ctx, o)
		}, func(obj runtime.Object) {
			have.slices[obj.(*discoveryv1.EndpointSlice).Name] = true
		}},
		{"serviceimports", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return w.mcs.MulticlusterV1beta1().ServiceImports(ns).List(ctx, o)
		}, func(obj runtime.Object) {
			have.imports[obj.(*mcsv1b1.ServiceImport).Name] = true
		}},
	}
	for _, l := range lists {
		err := pager.New(l.list).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
			l.add(obj)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", l.kind, ns, err)
		}
	}
	return have, nil
}

// ensureService writes the missing objects of service i and records its
// ClusterIP; it returns how many objects it wrote.
func (w *world) ensureService(ctx context.Context, have *present, i int) (int, error) {
	created := 0
	if i < w.opts.native {
		ip, ok := have.serviceIPs[benchfixture.ServiceName(i)]
		if !ok {
			var err error
			if ip, err = w.createService(ctx, benchfixture.ServiceName(i)); err != nil {
				return created, err
			}
			created++
		}
		w.serviceIPs[i] = ip
	}
	if !have.imports[benchfixture.ServiceName(i)] {
		if err := w.createImport(ctx, i); err != nil {
			return created, err
		}
		created++
	}
	for c := range w.opts.clusters {
		if have.slices[benchfixture.SliceName(c, i)] {
			continue
		}
		if err := w.createSlice(ctx, c, i); err != nil {
			return created, err
		}
		created++
	}
	return created, nil
}

var servicePorts = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}

// createService writes a selector-less ClusterIP Service, which no
// controller gives endpoints, and returns its ClusterIP.
func (w *world) createService(ctx context.Context, name string) (string, error) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.opts.namespace},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, Ports: servicePorts},
	}
	s, err := w.kube.CoreV1().Services(w.opts.namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("creating service %s: %w", name, err)
	}
	return s.Spec.ClusterIP, nil
}

func (w *world) createImport(ctx context.Context, i int) error {
	si := benchfixture.Import(w.opts.namespace, i)
	_, err := w.mcs.MulticlusterV1beta1().ServiceImports(w.opts.namespace).Create(ctx, si, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating serviceimport %s: %w", si.Name, err)
	}
	return nil
}

// createSlice writes the slice service i imports from source cluster c.
func (w *world) createSlice(ctx context.Context, c, i int) error {
	s := benchfixture.Slice(w.opts.namespace, c, i, w.opts.endpoints)
	_, err := w.kube.DiscoveryV1().EndpointSlices(w.opts.namespace).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating endpointslice %s: %w", s.Name, err)
	}
	return nil
}

func (w *world) listServices(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return w.kube.CoreV1().Services(w.opts.namespace).List(ctx, o)
}

// deleteTimeout bounds deleting the namespace, and waiting for it.
const deleteTimeout = 5 * time.Minute

// deleteNamespace removes every object of the run. The namespace controller
// finishes in the background, quickly: the Services, which it would delete
// one at a time at a few per second, are gone already.
func (w *world) deleteNamespace() error {
	ctx, cancel := context.WithTimeout(context.Background(), deleteTimeout)
	defer cancel()
	if err := w.deleteServices(ctx); err != nil {
		return err
	}
	err := w.kube.CoreV1().Namespaces().Delete(ctx, w.opts.namespace, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("deleting namespace %s: %w", w.opts.namespace, err)
	}
	log.Printf("deleted namespace %s", w.opts.namespace)
	return nil
}

// deleteServices deletes the namespace's Services in parallel: each one
// releases a ClusterIP, which is slow in the lab (see world).
func (w *world) deleteServices(ctx context.Context) error {
	var names []string
	err := pager.New(w.listServices).EachListItem(ctx, metav1.ListOptions{}, func(obj runtime.Object) error {
		names = append(names, obj.(*corev1.Service).Name)
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing services in %s: %w", w.opts.namespace, err)
	}
	return parallel(ctx, w.opts.workers, len(names), newProgress("services deleted", len(names)), func(i int) error {
		err := w.kube.CoreV1().Services(w.opts.namespace).Delete(ctx, names[i], metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting service %s: %w", names[i], err)
		}
		return nil
	})
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
