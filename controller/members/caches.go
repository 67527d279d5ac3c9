package members

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"
	alphainformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions/apis/v1alpha1"
	betainformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// byService indexes the EndpointSlice informer by namespace/service: a
// member's own slices of a service and those mcs-controller imported for
// it under one value, told apart by class (ours) when read. One index of
// both costs a set less for every service a member both provides and
// consumes: client-go keeps a set per value.
const byService = "service"

// caches are the informers of one member, started and stopped together:
// its Namespaces, and its Services, EndpointSlices, ServiceExports and
// ServiceImports in the namespaces the controller syncs (Scoped).
// ServiceExports and ServiceImports are stored as v1beta1 types whatever
// version the member serves.
type caches struct {
	services, slices, exports, imports Scoped
	namespaces                         cache.SharedIndexInformer
	factories                          []factory
	// selector is the label selector the Services, EndpointSlices and
	// ServiceImports were listed with (Options.Selector).
	selector string

	done <-chan struct{} // closed once stopped
	stop context.CancelFunc

	// held counts the objects in the informers' stores, and bytes about
	// what they take (bytesOf); past max or maxBytes, full is called once
	// (see Member.overflow).
	held, bytes   atomic.Int64
	max, maxBytes int64
	full          sync.Once
	// quota bounds the exports the member may have used.
	quota *exportQuota
}

// newCaches makes the member's informers, in the MCS API versions it
// serves, to run until ctx ends or stop; start starts them. Once they hold
// more than the member's maxObjects (0: no bound), it overflows, once.
func newCaches(ctx context.Context, m *Member, exports, imports schema.GroupVersion) (*caches, error) {
	c := makeCaches(m.Kube, m.MCS, exports, imports, m.namespaces, m.wantedSelector())
	c.max, c.maxBytes = int64(m.maxObjects), m.maxBytes
	c.quota.max = m.maxExports
	if err := c.count(m.overflow); err != nil {
		return nil, err
	}
	ctx, c.stop = context.WithCancel(ctx)
	c.done = ctx.Done()
	return c, nil
}

func (c *caches) start() {
	for _, f := range c.factories {
		f.Start(c.done)
	}
	go func() {
		<-c.done
		for _, f := range c.factories {
			f.Shutdown()
		}
	}()
}

// factory is what caches needs of an informer factory, client-go's or
// mcs-api's.
type factory interface {
	Start(stop <-chan struct{})
	Shutdown()
}

// makeCaches makes the informers of the namespaces given (none: every
// namespace), with the transform and the indexes the controller reads
// them by, and starts nothing. The informers of what the controller
// writes (Services, EndpointSlices, ServiceImports) list only the objects
// label selector sel selects; ServiceExports are the users' alone.
func makeCaches(kube kubernetes.Interface, mcs mcsclient.Interface, exports, imports schema.GroupVersion, namespaces []string, sel string) *caches {
	nf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trim))
	selected := func(o *metav1.ListOptions) { o.LabelSelector = sel }
	c := &caches{selector: sel, quota: &exportQuota{made: map[string]metav1.Time{}},
		namespaces: nf.InformerFor(&corev1.Namespace{}, func(k kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewNamespaceInformer(k, r, NoIndex)
		}),
		factories: []factory{nf},
	}
	// A factory per namespace and client: client-go's watch one namespace.
	kubeIn := func(ns string) informers.SharedInformerFactory {
		f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns), informers.WithTransform(trim))
		c.factories = append(c.factories, f)
		return f
	}
	mcsIn := func(ns string) mcsinformers.SharedInformerFactory {
		f := mcsinformers.NewSharedInformerFactoryWithOptions(mcs, 0, mcsinformers.WithNamespace(ns), mcsinformers.WithTransform(trim))
		c.factories = append(c.factories, f)
		return f
	}
	c.services = NewScoped(namespaces, func(ns string) cache.SharedIndexInformer {
		return kubeIn(ns).InformerFor(&corev1.Service{}, func(k kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredServiceInformer(k, ns, r, cache.Indexers{byService: providerIndex}, selected)
		})
	})
	c.slices = NewScoped(namespaces, func(ns string) cache.SharedIndexInformer {
		return kubeIn(ns).InformerFor(&discoveryv1.EndpointSlice{}, func(k kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return discoveryinformers.NewFilteredEndpointSliceInformer(k, ns, r, cache.Indexers{byService: serviceIndex}, selected)
		})
	})
	c.exports = NewScoped(namespaces, func(ns string) cache.SharedIndexInformer { return exportInformer(mcsIn(ns), exports, ns) })
	c.imports = NewScoped(namespaces, func(ns string) cache.SharedIndexInformer { return importInformer(mcsIn(ns), imports, ns, selected) })
	return c
}

// exportInformer makes the informer of the version served only: a factory
// starts every informer it made.
func exportInformer(f mcsinformers.SharedInformerFactory, gv schema.GroupVersion, ns string) cache.SharedIndexInformer {
	if mcsapi.IsAlpha(gv) {
		return f.InformerFor(&mcsv1a1.ServiceExport{}, func(c mcsclient.Interface, r time.Duration) cache.SharedIndexInformer {
			return alphainformers.NewFilteredServiceExportInformer(c, ns, r, NoIndex, nil)
		})
	}
	return f.InformerFor(&mcsv1b1.ServiceExport{}, func(c mcsclient.Interface, r time.Duration) cache.SharedIndexInformer {
		return betainformers.NewFilteredServiceExportInformer(c, ns, r, NoIndex, nil)
	})
}

func importInformer(f mcsinformers.SharedInformerFactory, gv schema.GroupVersion, ns string, tweak func(*metav1.ListOptions)) cache.SharedIndexInformer {
	if mcsapi.IsAlpha(gv) {
		return f.InformerFor(&mcsv1a1.ServiceImport{}, func(c mcsclient.Interface, r time.Duration) cache.SharedIndexInformer {
			return alphainformers.NewFilteredServiceImportInformer(c, ns, r, NoIndex, tweak)
		})
	}
	return f.InformerFor(&mcsv1b1.ServiceImport{}, func(c mcsclient.Interface, r time.Duration) cache.SharedIndexInformer {
		return betainformers.NewFilteredServiceImportInformer(c, ns, r, NoIndex, tweak)
	})
}

// all is every informer.
func (c *caches) all() []cache.SharedIndexInformer {
	out := []cache.SharedIndexInformer{c.namespaces}
	for _, s := range []Scoped{c.services, c.slices, c.exports, c.imports} {
		out = slices.AppendSeq(out, maps.Values(s))
	}
	return out
}

// handle sends the informers' events to h: each to h.Delivered first,
// then, unless an echo, to its kind's handler, on the same goroutine so
// that the kind's handler finds Delivered done. Objects already cached
// arrive as additions.
func (c *caches) handle(m *Member, h Handlers) error {
	cluster := m.Name
	delivered := func(kind string, obj any, gone bool) bool {
		o, ok := obj.(metav1.Object)
		return ok && h.Delivered != nil && h.Delivered(cluster, kind, o, gone)
	}
	// The quota knows of a change of an export, or of the Service behind
	// it, before its service is queued, on the same goroutine, so that the
	// sync finds it counted.
	countExport := func(obj any, _ bool) {
		o, ok := handler.Unwrap(obj).(metav1.Object)
		if !ok || c.exports.Get(o.GetNamespace(), o.GetName()) == nil && !c.quota.has(o.GetNamespace()+"/"+o.GetName()) {
			return
		}
		k := c.countExport(m, h.Allowed, o.GetNamespace(), o.GetName())
		if ns, name, err := cache.SplitMetaNamespaceKey(k); k != "" && err == nil {
			if moved := c.exports.Get(ns, name); moved != nil {
				h.Exports(cluster, moved)
			}
		}
	}
	for _, k := range []struct {
		kind  string
		s     Scoped
		fn    func(string, any)
		first func(obj any, gone bool)
	}{{"Service", c.services, h.Services, countExport}, {"EndpointSlice", c.slices, h.Slices, nil}, {"ServiceExport", c.exports, h.Exports, countExport}, {"ServiceImport", c.imports, h.Imports, nil}} {
		err := k.s.AddEventHandler(handler.Events(func(obj any, gone bool) {
			if k.first != nil {
				k.first(obj, gone)
			}
			if !delivered(k.kind, obj, gone) {
				k.fn(cluster, obj)
			}
		}))
		if err != nil {
			return err
		}
	}
	_, err := c.namespaces.AddEventHandler(handler.Events(func(obj any, gone bool) { delivered("Namespace", obj, gone) }))
	return err
}

// count keeps held and bytes, and calls full once either passes its
// bound, or one object passes maxObjectBytes, saying which. A handler sees
// an object once the store has it, in order, so adds less deletes is what
// the stores hold.
func (c *caches) count(full func(c *caches, over string)) error {
	check := func(obj any, n int64) {
		var over string
		switch {
		case c.max > 0 && c.held.Load() > c.max:
			over = fmt.Sprintf("more than %d objects (its Services, EndpointSlices, Namespaces, ServiceExports and ServiceImports together; --member-max-objects)", c.max)
		case c.maxBytes > 0 && c.bytes.Load() > c.maxBytes:
			over = fmt.Sprintf("objects that take more than %d MiB held, as decoded (--member-max-mib)", c.maxBytes>>20)
		case n > maxObjectBytes:
			m, _ := obj.(metav1.Object)
			over = fmt.Sprintf("an object, %s/%s, that takes %d KiB as decoded (no API server stores one of more than 1.5 MiB)", m.GetNamespace(), m.GetName(), n>>10)
		default:
			return
		}
		c.full.Do(func() { full(c, over) })
	}
	counter := cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			n := bytesOf(obj)
			c.held.Add(1)
			c.bytes.Add(n)
			check(obj, n)
		},
		UpdateFunc: func(old, obj any) {
			n := bytesOf(obj)
			c.bytes.Add(n - bytesOf(old))
			check(obj, n)
		},
		DeleteFunc: func(obj any) {
			c.held.Add(-1)
			c.bytes.Add(-bytesOf(obj))
		},
	}
	for _, inf := range c.all() {
		if _, err := inf.AddEventHandler(counter); err != nil {
			return err
		}
	}
	return nil
}

// objectOverhead is about what an object held takes besides its packed
// data and names: the packed struct, the store's and indexes' entries.
const objectOverhead = 200

// bytesOf is about what obj takes held, counted as decoded
// (packed.heldBytes): its object and names (a Namespace keeps its name
// alone), and objectOverhead.
func bytesOf(obj any) int64 {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	switch o := obj.(type) {
	case interface{ heldBytes() int }:
		return int64(o.heldBytes() + objectOverhead)
	case metav1.Object:
		return int64(len(o.GetName()) + len(o.GetNamespace()) + len(o.GetResourceVersion()) + objectOverhead)
	}
	return objectOverhead
}

func (c *caches) synced() []cache.InformerSynced {
	var out []cache.InformerSynced
	for _, inf := range c.all() {
		out = append(out, inf.HasSynced)
	}
	return out
}

// hasSynced reports whether every informer has delivered its first list.
func (c *caches) hasSynced() bool {
	for _, fn := range c.synced() {
		if !fn() {
			return false
		}
	}
	return true
}

// served is the version of an MCS API resource the member serves; a
// member that serves none is an error until the CRDs are installed.
func served(m *Member, resource string) (schema.GroupVersion, error) {
	gv, ok, err := mcsapi.Served(m.Kube.Discovery(), resource)
	if err == nil && !ok {
		err = fmt.Errorf("%s.%s is not served in v1beta1 or v1alpha1: install the MCS API CRDs", resource, mcsv1b1.GroupName)
	}
	return gv, err
}

// serviceIndex files a slice under its service: kubernetes.io/service-name
// for a member's own, ImportedService for one with the controller's
// managed-by label. It reads the labels, which a packed slice decodes.
func serviceIndex(obj any) ([]string, error) {
	s, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	l := s.GetLabels()
	svc := l[discoveryv1.LabelServiceName]
	if l[discoveryv1.LabelManagedBy] == api.ManagedBy {
		svc = ImportedService(l)
	}
	if svc == "" {
		return nil, nil
	}
	return []string{s.GetNamespace() + "/" + svc}, nil
}

// providerIndex files a provider Service of the controller's
// (api/providers.go) under the service it routes to a provider of, whose
// name its own does not tell. It decodes the labels of those alone.
func providerIndex(obj any) ([]string, error) {
	s, ok := obj.(metav1.Object)
	if !ok || !ours(obj) || !api.IsProviderService(s.GetName()) {
		return nil, nil
	}
	if svc := s.GetLabels()[mcsv1b1.LabelServiceName]; svc != "" {
		return []string{s.GetNamespace() + "/" + svc}, nil
	}
	return nil, nil
}

// ImportedService is the service a slice with the controller's managed-by
// label (labels) is filed under: multicluster.kubernetes.io/service-name,
// which every slice the controller writes has; else, for one it never
// wrote (forged with a member's token, or left by another tool), the
// Service kube-proxy joins it to, derived- cut off, so that the sync of
// that service finds it among the imported slices and deletes it.
func ImportedService(labels map[string]string) string {
	if svc := labels[mcsv1b1.LabelServiceName]; svc != "" {
		return svc
	}
	svc, _ := strings.CutPrefix(labels[discoveryv1.LabelServiceName], api.DerivedPrefix)
	return svc
}
