package controller

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	mcsclient "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	mcsinformers "github.com/coredns-mcs/coredns-mcs/api/client/informers/externalversions"
	mcsv1a1informers "github.com/coredns-mcs/coredns-mcs/api/client/informers/externalversions/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// crdPoll is how often the controller asks whether the hub serves
// MultiClusterServices yet, while it does not: one discovery request.
const crdPoll = 10 * time.Second

// hubMCS is the hub's MultiClusterService informers, one per namespace
// the controller syncs (members.Scoped). A hub without the CRD (an
// operator who uses only ServiceExports, or forgot deploy/crds) is a hub
// without MultiClusterServices: the informers start once the CRD is
// served, and the ServiceExport path works meanwhile.
type hubMCS struct {
	mu        sync.RWMutex
	factories []mcsinformers.SharedInformerFactory
	informers members.Scoped
}

// watchMCS starts the MultiClusterService informer and waits for its list
// when the hub serves the CRD; otherwise it says so once and starts it
// when the CRD appears.
func (c *Controller) watchMCS(ctx context.Context) error {
	served, err := mcsapi.Serves(c.opts.HubMCS.Discovery(), v1alpha1.SchemeGroupVersion, v1alpha1.MultiClusterServiceResource.Resource)
	if err == nil && served {
		return c.startMCS(ctx)
	}
	if err != nil {
		klog.ErrorS(err, "Cannot tell whether the hub serves MultiClusterServices: checking again", "every", c.crdPoll)
	} else {
		klog.ErrorS(nil, "The hub serves no MultiClusterService: only ServiceExports are synced until its CRD is installed (kubectl apply -f deploy/crds/mcs.coredns-mcs.io_multiclusterservices.yaml)",
			"resource", v1alpha1.MultiClusterServiceResource.String(), "checking every", c.crdPoll)
	}
	go c.awaitCRD(ctx)
	return nil
}

func (c *Controller) awaitCRD(ctx context.Context) {
	err := wait.PollUntilContextCancel(ctx, c.crdPoll, false, func(context.Context) (bool, error) {
		served, err := mcsapi.Serves(c.opts.HubMCS.Discovery(), v1alpha1.SchemeGroupVersion, v1alpha1.MultiClusterServiceResource.Resource)
		return err == nil && served, nil
	})
	if err == nil && c.startMCS(ctx) == nil {
		klog.InfoS("The hub serves MultiClusterServices now")
		c.enqueueAll()
	}
}

func (c *Controller) startMCS(ctx context.Context) error {
	var factories []mcsinformers.SharedInformerFactory
	infs := members.NewScoped(c.opts.Namespaces, func(ns string) cache.SharedIndexInformer {
		f := mcsinformers.NewSharedInformerFactoryWithOptions(c.opts.HubMCS, 0, mcsinformers.WithNamespace(ns), mcsinformers.WithTransform(members.TrimHub))
		factories = append(factories, f)
		return f.InformerFor(&v1alpha1.MultiClusterService{}, func(client mcsclient.Interface, r time.Duration) cache.SharedIndexInformer {
			return mcsv1a1informers.NewFilteredMultiClusterServiceInformer(client, ns, r, members.NoIndex, nil)
		})
	})
	err := infs.AddEventHandler(handler.Events(func(obj any, gone bool) {
		if o, ok := obj.(metav1.Object); ok && c.track.delivered(mcsKey(o.GetNamespace(), o.GetName()), o, gone) {
			return // the echo of a write of the controller's
		}
		c.enqueueObject(obj, "")
	}))
	if err != nil {
		return err
	}
	c.hub.mu.Lock()
	if ctx.Err() != nil { // stopped: shutdown has run or is waiting
		c.hub.mu.Unlock()
		return ctx.Err()
	}
	c.hub.factories, c.hub.informers = factories, infs
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	c.hub.mu.Unlock()
	if !cache.WaitForNamedCacheSync("mcs-controller", ctx.Done(), infs.HasSynced) {
		return ctx.Err()
	}
	return nil
}

// shutdown waits for the informers to end, once their context has ended.
func (h *hubMCS) shutdown() {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, f := range h.factories {
		f.Shutdown()
	}
}

// get is the hub's MultiClusterService namespace/name, or nil.
func (h *hubMCS) get(namespace, name string) *v1alpha1.MultiClusterService {
	h.mu.RLock()
	defer h.mu.RUnlock()
	m, _ := members.Unpacked(h.informers.Get(namespace, name)).(*v1alpha1.MultiClusterService)
	return m
}

// cached is the hub's MultiClusterService namespace/name as its informer
// holds it, packed, or nil.
func (h *hubMCS) cached(namespace, name string) any {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.informers.Get(namespace, name)
}

// has reports whether the hub has MultiClusterService namespace/name,
// decoding nothing.
func (h *hubMCS) has(namespace, name string) bool { return h.cached(namespace, name) != nil }

// keys lists every MultiClusterService's namespace/name.
func (h *hubMCS) keys() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.informers.Keys()
}

// synced reports whether the informers have listed, or are not needed: a
// hub without the CRD has no MultiClusterService to wait for.
func (h *hubMCS) synced() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.informers.HasSynced()
}
