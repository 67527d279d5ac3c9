// Package controller is mcs-controller's sync loop: informers on the hub
// and on every member feed one rate-limited queue of service keys
// (namespace/name), and sync(key) reads the caches, computes what every
// member should hold (package desired), and writes only the difference.
package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"golang.org/x/time/rate"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsclient "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// Options configure a Controller.
type Options struct {
	HubKube kubernetes.Interface
	HubMCS  mcsclient.Interface
	Members *members.Registry
	// Namespaces limits the controller to services of these namespaces;
	// empty: every namespace.
	Namespaces []string
	// Shards, when set, limits the controller to the services of the
	// shards this replica holds; nil: every service.
	Shards  *shards.Set
	Workers int
	// MemberInFlight bounds the services whose writes are under way in
	// one member at once (fanout.go); 0: no bound.
	MemberInFlight int
	// Namespace is the controller's own namespace: its services are never
	// exported (see protected.go), nor are those AllowExport does not name.
	Namespace   string
	AllowExport []string
	// Protected are namespaces protected besides the built-in ones
	// (protected.go).
	Protected []string
	// DefaultExports is where a member that no bound narrows may export
	// from (hubnamespaces.go); the zero value, anywhere.
	DefaultExports DefaultExports
	// CreateNamespaces lets the controller create a service's namespace
	// in a consumer that lacks it (--create-namespaces). Off by default:
	// a namespace named like a domain (com) makes a Service in it answer
	// names outside the cluster through the pods' search path, so making
	// one is the member's operator's choice (kubectl mcs join
	// --create-namespaces grants it).
	CreateNamespaces bool
	// MaxImportedEndpoints bounds the endpoints of a service imported
	// from one provider (desired.Input.MaxEndpoints); 0: no bound.
	MaxImportedEndpoints int
	// MaxImportedPorts bounds the ports of an import (desired.Input.MaxPorts);
	// 0: no bound.
	MaxImportedPorts int
	// MemberMaxEndpoints bounds the endpoints one member's exports import
	// into each consumer, all together (endpointbudget.go); 0: no bound.
	MemberMaxEndpoints int
	// ChangeRate is how many changes of one member a second queue
	// their services at once (budget.go); 0: no bound.
	ChangeRate float64
	// StaleAfter is how long a member may be unhealthy before it counts
	// as stale, as its Leases source-<member> do in coredns-mcs: their
	// duration. 0: never.
	StaleAfter time.Duration
	// Clock is the queue's, for its delays, and the writes' (fanout.go);
	// nil: the real clock. Unit tests give the members' fake one.
	Clock clock.WithTicker
}

// Controller syncs every multi-cluster service.
type Controller struct {
	opts     Options
	queue    workqueue.TypedRateLimitingInterface[string]
	recorder record.EventRecorder
	track    *tracker

	hub     hubMCS
	crdPoll time.Duration
	fan     *fanout
	// hubServices are the hub's Services, by namespace synced.
	hubServices  members.Scoped
	hubFactories []informers.SharedInformerFactory
	// ages are the hub's ConfigMaps of when exports were first seen
	// (ages.go).
	ages cache.SharedIndexInformer
	// perMember is what the controller notes of each member (state.go).
	perMember *memberStates
	// endpoints are what each member's exports cost (endpointbudget.go).
	endpoints *endpointBudgets
	// hubNamespaces are the hub's Namespaces, unless DefaultExports is
	// AnyNamespace; hubNamespacesHandled is their handler's, which
	// recounts exports.
	hubNamespaces        cache.SharedIndexInformer
	hubNamespacesHandled cache.ResourceEventHandlerRegistration

	// perService is what the controller notes of each service (state.go).
	perService *serviceStates
}

// New makes a Controller; the registry's handlers must be the ones
// Handlers returns, so member events reach its queue.
func New(opts Options) *Controller {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	c := &Controller{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[string](10*time.Millisecond, 30*time.Second),
				&workqueue.TypedBucketRateLimiter[string]{Limiter: newBucket()},
			),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "service", Clock: opts.Clock},
		),
		crdPoll:    crdPoll,
		perMember:  &memberStates{changeRate: opts.ChangeRate},
		perService: &serviceStates{},
	}
	c.endpoints = newEndpointBudgets(opts.MemberMaxEndpoints, opts.MaxImportedEndpoints, c.perMember)
	c.track = newTracker(opts.Clock, c.requeueUnseen)
	c.fan = &fanout{members: c.perMember, services: c.perService, wait: memberWait, clock: opts.Clock, requeue: c.queue.Add, slots: newSlots(opts.MemberInFlight)}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartStructuredLogging(2)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: opts.HubKube.CoreV1().Events("")})
	s := runtime.NewScheme()
	utilruntime.Must(scheme.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	c.recorder = broadcaster.NewRecorder(s, corev1.EventSource{Component: "mcs-controller"})

	c.hubServices = members.NewScoped(opts.Namespaces, func(ns string) cache.SharedIndexInformer {
		f := informers.NewSharedInformerFactoryWithOptions(opts.HubKube, 0, informers.WithNamespace(ns), informers.WithTransform(members.TrimHub))
		c.hubFactories = append(c.hubFactories, f)
		return f.InformerFor(&corev1.Service{}, func(k kubernetes.Interface, r time.Duration) cache.SharedIndexInformer {
			return coreinformers.NewFilteredServiceInformer(k, ns, r, members.NoIndex, nil)
		})
	})
	_ = c.hubServices.AddEventHandler(handler.Each(func(obj any) { c.enqueueRelevant(obj) }))
	c.watchAges()
	if opts.DefaultExports != AnyNamespace {
		c.watchHubNamespaces()
	}
	return c
}

// Handlers are the registry's handlers: member events feed the queue.
func (c *Controller) Handlers() members.Handlers {
	return members.Handlers{
		Services: func(cluster string, obj any) {
			if a, ok := metaOf(obj); ok {
				c.costTouched(cluster, a.namespace, a.name, false)
			}
			c.serviceEvent(cluster, obj)
		},
		Slices: c.sliceEvent,
		Exports: func(cluster string, obj any) {
			if a, ok := metaOf(obj); ok {
				c.costTouched(cluster, a.namespace, a.name, true)
			}
			c.memberEvent(cluster, obj)
		},
		Imports: c.memberEvent,
		Delivered: func(cluster, kind string, obj metav1.Object, gone bool) bool {
			return c.track.delivered(trackKey{cluster, kind, obj.GetNamespace(), obj.GetName()}, obj, gone)
		},
		Allowed: c.allowed,
		Changed: c.memberChanged,
	}
}

// Run starts the hub informers and workers, and blocks until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer utilruntime.HandleCrash()
	defer c.shutdown()
	if err := c.start(ctx); err != nil {
		return err
	}
	hubConditions.hub.Store(&c.hub)
	defer hubConditions.hub.CompareAndSwap(&c.hub, nil)
	// Every service now, and again once a member away since the start
	// would be stale.
	c.memberChanged("")
	var wg sync.WaitGroup
	wg.Go(func() { wait.Until(c.track.sweep, trackTTL, ctx.Done()) })
	for range max(1, c.opts.Workers) {
		wg.Go(func() { wait.UntilWithContext(ctx, c.work, time.Second) })
	}
	klog.InfoS("Started workers", "workers", max(1, c.opts.Workers))
	<-ctx.Done()
	c.queue.ShutDown() // the workers return
	wg.Wait()
	return nil
}

// start runs the hub informers until ctx ends, and waits until they and
// the members have synced.
func (c *Controller) start(ctx context.Context) error {
	for _, f := range c.hubFactories {
		f.Start(ctx.Done())
	}
	if !cache.WaitForNamedCacheSync("mcs-controller", ctx.Done(), c.hubServices.HasSynced, c.ages.HasSynced, c.hubNamespacesSynced) {
		return fmt.Errorf("hub informers did not sync: %w", ctx.Err())
	}
	if err := c.watchMCS(ctx); err != nil {
		return fmt.Errorf("hub MultiClusterServices did not sync: %w", err)
	}
	c.awaitMembers(ctx)
	return nil
}

// shutdown waits for the hub informers to end, once ctx has ended.
func (c *Controller) shutdown() {
	for _, f := range c.hubFactories {
		f.Shutdown()
	}
	c.hub.shutdown()
}

// memberSettleTimeout bounds the wait for members at start: one that takes
// longer delays the others no more.
const memberSettleTimeout = 30 * time.Second

// awaitMembers waits until every member was probed and, when it answered,
// has synced. A sync before that would report a member that is only
// starting up as out of reach, and a restart would flip every condition.
func (c *Controller) awaitMembers(ctx context.Context) {
	var pending string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, memberSettleTimeout, true, func(context.Context) (bool, error) {
		var ok bool
		ok, pending = c.opts.Members.Settled()
		return ok, nil
	})
	if err != nil && ctx.Err() == nil {
		klog.InfoS("Starting before every member is known", "waited", memberSettleTimeout, "pending", pending)
	}
}

// Synced reports whether the hub informers and every reachable member's
// informers have synced: the controller's readiness.
func (c *Controller) Synced() error {
	switch {
	case !c.hub.synced():
		return fmt.Errorf("the hub's MultiClusterServices have not been listed")
	case !c.hubServices.HasSynced():
		return fmt.Errorf("the hub's Services have not been listed")
	case !c.ages.HasSynced():
		return fmt.Errorf("the hub's ConfigMaps of export ages have not been listed")
	case !c.hubNamespacesSynced():
		return fmt.Errorf("the hub's Namespaces have not been listed")
	case !c.opts.Members.Synced():
		return fmt.Errorf("the member Secrets on the hub have not been listed")
	}
	for _, m := range c.opts.Members.List() {
		if ok, _ := m.Reachable(); ok && !m.Synced() {
			return fmt.Errorf("member %s has not synced", m.Name)
		}
	}
	return nil
}

func (c *Controller) work(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	c.retireCleaned()
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	klog.ErrorS(err, "Sync failed, will retry", "service", key, "retries", c.queue.NumRequeues(key))
	c.queue.AddRateLimited(key)
	return true
}

func (c *Controller) inScope(namespace string) bool {
	return len(c.opts.Namespaces) == 0 || slices.Contains(c.opts.Namespaces, namespace)
}

// mine reports whether service namespace/name is this replica's to sync:
// of a namespace synced, and of a shard it holds.
func (c *Controller) mine(namespace, name string) bool {
	return c.inScope(namespace) && (c.opts.Shards == nil || c.opts.Shards.Owns(namespace, name))
}

func (c *Controller) mineKey(key string) bool {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	return err == nil && c.mine(ns, name)
}

// retireCleaned lets a retiring member go once it holds nothing the
// controller wrote in the namespaces it syncs, or, renamed, once its
// successor has synced (rename.go). Every deletion of such an
// object queues its service again, so the check after the last one sees
// the member empty.
func (c *Controller) retireCleaned() {
	for _, m := range c.opts.Members.List() {
		if !m.Retiring() {
			continue
		}
		succ, pending := c.successor(m)
		switch {
		case succ != nil && succ.Synced(), succ == nil && !pending && !slices.ContainsFunc(m.ManagedKeys(), c.mineKey):
			c.opts.Members.Retired(m.Name)
		}
	}
}

func (c *Controller) enqueue(namespace, name string) {
	if c.mine(namespace, name) {
		c.queue.Add(namespace + "/" + name)
	}
}

// enqueueObject queues the object's key, with prefix cut from its name.
func (c *Controller) enqueueObject(obj any, prefix string) {
	a, ok := metaOf(obj)
	if !ok {
		return
	}
	c.enqueue(a.namespace, strings.TrimPrefix(a.name, prefix))
}

// enqueueRelevant queues a Service's key when something multi-cluster is
// asked of it: ordinary Services of big clusters cost no syncs.
func (c *Controller) enqueueRelevant(obj any) {
	a, ok := metaOf(obj)
	if ok && c.relevant(a.namespace, a.name) {
		c.enqueue(a.namespace, a.name)
	}
}

// memberEvent queues, as cluster's budget allows, the service of the
// object a member changed.
func (c *Controller) memberEvent(cluster string, obj any) {
	if a, ok := metaOf(obj); ok {
		c.changed(cluster, a.namespace, a.name)
	}
}

// changed queues service namespace/name, of this replica's, for a change
// of cluster's, as its budget allows (budget.go).
func (c *Controller) changed(cluster, namespace, name string) {
	if c.mine(namespace, name) {
		c.sourceChanged(cluster, namespace+"/"+name)
	}
}

// serviceEvent queues the service a Service is, and the one it is the
// derived- name of: also when that one is someone else's (Karmada's, say),
// so that the controller takes the name over as soon as it is deleted. A
// user's Service named derived-foo may be a multi-cluster service of its
// own besides: both are queued.
func (c *Controller) serviceEvent(cluster string, obj any) {
	a, ok := metaOf(obj)
	if !ok {
		return
	}
	if svc, derived := strings.CutPrefix(a.name, api.DerivedPrefix); derived && (a.labels()[api.LabelManagedBy] == api.ManagedBy || c.relevant(a.namespace, svc)) {
		c.changed(cluster, a.namespace, svc)
	}
	if c.relevant(a.namespace, a.name) {
		c.changed(cluster, a.namespace, a.name)
	}
}

func (c *Controller) sliceEvent(cluster string, obj any) {
	a, ok := metaOf(obj)
	if !ok {
		return
	}
	labels := a.labels()
	if labels[discoveryv1.LabelManagedBy] == api.ManagedBy {
		// Someone else's change to an imported slice is undone by a sync
		// (the echo of the controller's own write never gets here).
		if svc := members.ImportedService(labels); svc != "" {
			c.changed(cluster, a.namespace, svc)
		}
		return
	}
	svc := labels[discoveryv1.LabelServiceName]
	if svc != "" {
		c.costTouched(cluster, a.namespace, svc, false)
	}
	if svc == "" || !c.mine(a.namespace, svc) || !c.relevant(a.namespace, svc) {
		return
	}
	key := a.namespace + "/" + svc
	c.perService.update(key, func(s *serviceState) {
		if s.seen.IsZero() {
			s.seen = time.Now()
		}
	})
	c.sourceChanged(cluster, key)
	// A sync of the key that waits for a member's writes ends its wait,
	// so that the change goes to every other member at once (fanout.go).
	if o, ok := obj.(metav1.Object); ok {
		c.fan.sourceChanged(key, cluster, o)
	}
}

// relevant reports whether a MultiClusterService, a ServiceExport or a
// ServiceImport exists for the service anywhere.
func (c *Controller) relevant(namespace, name string) bool {
	if !c.inScope(namespace) {
		return false
	}
	if c.hub.has(namespace, name) {
		return true
	}
	for _, m := range c.opts.Members.List() {
		if m.HasExport(namespace, name) || m.HasImport(namespace, name) {
			return true
		}
	}
	return false
}

// memberChanged queues every service when a member comes, goes, syncs or
// changes reachability; a sync that finds a provider unhealthy queues its
// service again for when it would be stale (recheckStale). A member that joined and is still
// being probed and listed queues nothing until it has settled: every
// service would otherwise report it unreachable, then recover, two status
// writes and two Events each (a join of a 10,000-service fleet).
func (c *Controller) memberChanged(name string) {
	m := c.member(name)
	switch {
	case m != nil && !m.Settled():
		return
	case m == nil && name != "":
		c.forget(name)
	}
	c.enqueueAll()
}

// forget drops what the controller noted of a member that left (state.go),
// and its metric of exports over budget.
func (c *Controller) forget(member string) {
	c.perMember.forget(member)
	c.endpoints.forget(member)
}

// requeueUnseen queues the service of a write the tracker forgot before
// its informer delivered it, unless the cache holds it now: the object
// may be gone without the informer having seen it, and the sync must
// make it anew.
func (c *Controller) requeueUnseen(k trackKey, w tracked) {
	var cached metav1.Object
	switch m := c.member(k.cluster); {
	case k == mcsKey(k.namespace, k.name):
		cached = nilIfNone(c.hub.get(k.namespace, k.name))
	case k.kind == "ConfigMap":
		cached = nilIfNone(c.agesCached(k))
	case m == nil:
		return // it left
	case k.kind == "Namespace":
		if m.HasNamespace(k.name) {
			return
		}
	case k.kind == "EndpointSlice":
		cached = nilIfNone(m.Slice(k.namespace, k.name))
	case k.kind == "Service":
		cached = nilIfNone(m.Service(k.namespace, k.name))
	case k.kind == "ServiceImport":
		cached = nilIfNone(m.Import(k.namespace, k.name))
	case k.kind == "ServiceExport":
		cached = nilIfNone(m.Export(k.namespace, k.name))
	}
	if cached == nil || !newerOrSame(cached, w.obj) {
		c.queue.Add(w.service)
	}
}

// nilIfNone is o as a metav1.Object, nil for a nil pointer.
func nilIfNone[P interface {
	*E
	metav1.Object
}, E any](o P) metav1.Object {
	if o == nil {
		return nil
	}
	return o
}

// member is the registered member of that name, or nil.
func (c *Controller) member(name string) *members.Member {
	for _, m := range c.opts.Members.List() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Resync queues every service: those of the shards just held too, whose
// export ages are read from the hub again.
func (c *Controller) Resync() {
	c.forgetAges()
	c.enqueueAll()
}

// enqueueAll queues every service something multi-cluster is asked of, or
// that a member holds an object of the controller's for.
func (c *Controller) enqueueAll() {
	keys := c.hub.keys()
	for _, m := range c.opts.Members.List() {
		keys = append(keys, m.ExportKeys()...)
		keys = append(keys, m.ImportKeys()...)
		keys = append(keys, m.ManagedKeys()...)
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if c.mineKey(k) {
			c.queue.Add(k)
		}
	}
}

type objectMeta struct {
	namespace, name string
	obj             labelled
}

type labelled interface {
	GetNamespace() string
	GetName() string
	GetLabels() map[string]string
}

// labels are the object's labels, which a cached object decodes: the
// handlers that need no labels read none.
func (o objectMeta) labels() map[string]string { return o.obj.GetLabels() }

func metaOf(obj any) (objectMeta, bool) {
	o, ok := handler.Unwrap(obj).(labelled)
	if !ok {
		return objectMeta{}, false
	}
	return objectMeta{o.GetNamespace(), o.GetName(), o}, true
}

// newBucket bounds the overall retry rate, as client-go's default
// controller rate limiter does.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(50), 500) }
