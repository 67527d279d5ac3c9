// Package controller is mcs-controller's sync loop: informers on the hub
// and on every member feed one rate-limited queue of service keys
// (namespace/name), and sync(key) reads the caches, computes what every
// member should hold (package desired), and writes only the difference.
package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
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
	ages *exportAges
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
	c.fan = &fanout{perMember: c.perMember, perService: c.perService, wait: memberWait, clock: opts.Clock, requeue: c.queue.Add, slots: newSlots(opts.MemberInFlight)}
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
	if !cache.WaitForNamedCacheSync("mcs-controller", ctx.Done(), c.hubServices.HasSynced, c.ages.informer.HasSynced, c.hubNamespacesSynced) {
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
	case !c.ages.informer.HasSynced():
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

// member is the registered member of that name, or nil.
func (c *Controller) member(name string) *members.Member {
	for _, m := range c.opts.Members.List() {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// newBucket bounds the overall retry rate, as client-go's default
// controller rate limiter does.
func newBucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(50), 500) }
