package members

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// caches are the informers of one member, started and stopped together.
type caches struct {
	services, slices, namespaces, exports, imports cache.SharedIndexInformer

	done <-chan struct{} // closed once stopped
	stop context.CancelFunc
}

// newCaches starts informers on a member's Services, EndpointSlices,
// Namespaces, and ServiceExports and ServiceImports of the given versions;
// they run until ctx ends or stop.
func newCaches(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, exports, imports schema.GroupVersionResource) (*caches, error) {
	ctx, cancel := context.WithCancel(ctx)
	kf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(trimManagedFields))
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	c := &caches{
		services:   kf.Core().V1().Services().Informer(),
		slices:     kf.Discovery().V1().EndpointSlices().Informer(),
		namespaces: kf.Core().V1().Namespaces().Informer(),
		exports:    df.ForResource(exports).Informer(),
		imports:    df.ForResource(imports).Informer(),
		done:       ctx.Done(),
		stop:       cancel,
	}
	if err := c.slices.AddIndexers(cache.Indexers{BySourceService: sourceServiceIndex, ByImportedService: importedServiceIndex}); err != nil {
		cancel()
		return nil, err
	}
	for _, inf := range []cache.SharedIndexInformer{c.exports, c.imports} {
		if err := inf.SetTransform(toTyped); err != nil {
			cancel()
			return nil, err
		}
	}
	kf.Start(ctx.Done())
	df.Start(ctx.Done())
	go func() {
		<-ctx.Done()
		kf.Shutdown()
		df.Shutdown()
	}()
	return c, nil
}

// handle sends the informers' events to h. Objects already cached arrive
// as additions.
func (c *caches) handle(cluster string, h Handlers) error {
	for inf, fn := range map[cache.SharedIndexInformer]func(string, any){c.services: h.Services, c.slices: h.Slices, c.exports: h.Exports, c.imports: h.Imports} {
		if _, err := inf.AddEventHandler(handler(cluster, fn)); err != nil {
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
