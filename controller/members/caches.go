package members

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// Indexes of the EndpointSlice informer, by namespace/service.
const (
	// BySourceService: the member's own slices of a service.
	BySourceService = "source-service"
	// ByImportedService: slices mcs-controller imported for a service.
	ByImportedService = "imported-service"
)

// caches are the informers of one member, started and stopped together.
// ServiceExports and ServiceImports are stored as v1beta1 types whatever
// version the member serves.
type caches struct {
	services, slices, namespaces, exports, imports cache.SharedIndexInformer
	factories                                      []factory

	done <-chan struct{} // closed once stopped
	stop context.CancelFunc

	// held counts the objects in the informers' stores; past max, full is
	// called once (see Member.overflow).
	held atomic.Int64
	max  int64
	full sync.Once
}

// newCaches starts informers on a member's Services, EndpointSlices,
// Namespaces, and ServiceExports and ServiceImports of the given versions;
// they run until ctx ends or stop. Once they hold more than max objects
// (0: no bound), full is called, once.
func newCaches(ctx context.Context, kube kubernetes.Interface, mcs mcsclient.Interface, exports, imports schema.GroupVersion, max int, full func(*caches)) (*caches, error) {
	c, err := makeCaches(kube, mcs, exports, imports)
	if err != nil {
		return nil, err
	}
	c.max = int64(max)
	if err := c.count(full); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	c.done, c.stop = ctx.Done(), cancel
	for _, f := range c.factories {
		f.Start(ctx.Done())
	}
	go func() {
		<-ctx.Done()
		for _, f := range c.factories {
			f.Shutdown()
		}
	}()
	return c, nil
}

// factory is what caches needs of an informer factory, client-go's or
// mcs-api's.
type factory interface {
	Start(stop <-chan struct{})
	Shutdown()
}

// makeCaches makes the informers, with the transform and the indexes the
// controller reads them by, and starts nothing.
func makeCaches(kube kubernetes.Interface, mcs mcsclient.Interface, exports, imports schema.GroupVersion) (*caches, error) {
	kf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trim))
	mf := mcsinformers.NewSharedInformerFactoryWithOptions(mcs, 0, mcsinformers.WithTransform(trim))
	c := &caches{
		services:   kf.Core().V1().Services().Informer(),
		slices:     kf.Discovery().V1().EndpointSlices().Informer(),
		namespaces: kf.Core().V1().Namespaces().Informer(),
		exports:    exportInformer(mf, exports),
		imports:    importInformer(mf, imports),
		factories:  []factory{kf, mf},
	}
	if err := c.slices.AddIndexers(cache.Indexers{BySourceService: sourceServiceIndex, ByImportedService: importedServiceIndex}); err != nil {
		return nil, err
	}
	return c, nil
}

// Only the informer of the version served is made: the factory starts
// every informer it made.
func exportInformer(f mcsinformers.SharedInformerFactory, gv schema.GroupVersion) cache.SharedIndexInformer {
	if mcsapi.IsAlpha(gv) {
		return f.Multicluster().V1alpha1().ServiceExports().Informer()
	}
	return f.Multicluster().V1beta1().ServiceExports().Informer()
}

func importInformer(f mcsinformers.SharedInformerFactory, gv schema.GroupVersion) cache.SharedIndexInformer {
	if mcsapi.IsAlpha(gv) {
		return f.Multicluster().V1alpha1().ServiceImports().Informer()
	}
	return f.Multicluster().V1beta1().ServiceImports().Informer()
}

// handle sends the informers' events to h. Objects already cached arrive
// as additions.
func (c *caches) handle(cluster string, h Handlers) error {
	for inf, fn := range map[cache.SharedIndexInformer]func(string, any){c.services: h.Services, c.slices: h.Slices, c.exports: h.Exports, c.imports: h.Imports} {
		if _, err := inf.AddEventHandler(handler.Each(func(obj any) { fn(cluster, obj) })); err != nil {
			return err
		}
	}
	return nil
}

// count keeps held, and calls full once it passes max. A handler sees an
// object once the store has it, in order, so adds less deletes is what
// the stores hold.
func (c *caches) count(full func(*caches)) error {
	counter := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			if n := c.held.Add(1); c.max > 0 && n > c.max {
				c.full.Do(func() { full(c) })
			}
		},
		DeleteFunc: func(any) { c.held.Add(-1) },
	}
	for _, inf := range []cache.SharedIndexInformer{c.services, c.slices, c.namespaces, c.exports, c.imports} {
		if _, err := inf.AddEventHandler(counter); err != nil {
			return err
		}
	}
	return nil
}

func (c *caches) synced() []cache.InformerSynced {
	return []cache.InformerSynced{c.services.HasSynced, c.slices.HasSynced, c.namespaces.HasSynced, c.exports.HasSynced, c.imports.HasSynced}
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

func sourceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] == api.ManagedBy {
		return nil, nil
	}
	if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
		return []string{s.Namespace + "/" + svc}, nil
	}
	return nil, nil
}

func importedServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != api.ManagedBy {
		return nil, nil
	}
	if svc := s.Labels[mcsv1b1.LabelServiceName]; svc != "" {
		return []string{s.Namespace + "/" + svc}, nil
	}
	return nil, nil
}
