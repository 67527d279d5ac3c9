package mcs

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns/coredns/plugin/ready"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsinformers "sigs.k8s.io/mcs-api/pkg/client/informers/externalversions"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
)

// startupTimeout is how long start-up waits for the informers, as the
// kubernetes plugin's default: past it CoreDNS serves, mcs passes native
// names on (an NXDOMAIN becoming SERVFAIL), and keeps trying.
const startupTimeout = 5 * time.Second

// importPoll is how often mcs asks whether ServiceImports are served yet
// when the MCS API CRDs are missing: one discovery request, and imports are
// picked up that long after the CRDs are installed, without a restart.
const importPoll = 10 * time.Second

// peerPoll is how often mcs, once synced, asks whether the server's other
// plugins have synced too (returnSyncGarbage), and peersBound how long it
// asks.
const (
	peerPoll   = time.Second
	peersBound = 10 * time.Minute
)

// watcher resolves the cluster name, runs the informers that feed the
// index, and says when it is ready.
type watcher struct {
	cfg *config
	cl  clients
	idx *index

	startupTimeout time.Duration
	importPoll     time.Duration
	peerPoll       time.Duration
	peers          []ready.Readiness // the server's other plugins that say when they are ready; set before start
	keepZones      bool              // keep the endpoints' topology zones, for zonal names; set before start
	freeMemory     func()
	ready          atomic.Bool
	synced         chan struct{} // closed once ready
	fatal          chan error    // a configuration error found while starting

	mu        sync.Mutex
	cancel    context.CancelFunc
	factories []interface{ Shutdown() }
	informers []watched
}

// watchedResources label the informers_synced gauge, one per informer.
var watchedResources = []string{"services", "endpointslices", "namespaces", "leases", "serviceimports"}

// watched is one informer and the registration of the handler feeding the
// index; the registration says when that handler has seen the initial list.
type watched struct {
	resource string
	reg      cache.ResourceEventHandlerRegistration
}

func newWatcher(cfg *config, cl clients, idx *index) *watcher {
	w := &watcher{cfg: cfg, cl: cl, idx: idx, startupTimeout: startupTimeout, importPoll: importPoll, peerPoll: peerPoll, freeMemory: debug.FreeOSMemory, synced: make(chan struct{}), fatal: make(chan error, 1)}
	if cl.health != nil {
		cl.health.onChange = w.apiChanged
	}
	return w
}

// start is the OnStartup hook. A configuration error (no cluster name) fails
// start-up; an unreachable API server does not: CoreDNS must serve the rest.
func (w *watcher) start() error {
	ctx, cancel := context.WithCancel(context.Background())
	w.mu.Lock()
	w.cancel = cancel
	w.mu.Unlock()
	for _, r := range watchedResources {
		informersSynced.WithLabelValues(r).Set(0)
	}
	go w.run(ctx)
	timer := time.NewTimer(w.startupTimeout)
	defer timer.Stop()
	select {
	case <-w.synced:
		return nil
	case err := <-w.fatal:
		cancel()
		return err
	case <-timer.C:
		log.Warningf("starting before the Kubernetes API at %s has synced; until it has, native names go to the next plugin (its NXDOMAIN becoming SERVFAIL) and clusterset names answer SERVFAIL", w.cl.host)
		return nil
	}
}

// stop is the OnShutdown hook.
func (w *watcher) stop() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
	}
	for _, f := range w.factories {
		f.Shutdown()
	}
	return nil
}

func (w *watcher) run(ctx context.Context) {
	cluster, gv, served, err := w.prepare(ctx)
	if err != nil {
		return // stopped
	}
	w.idx.self = cluster
	w.mu.Lock()
	w.startInformers(ctx)
	if served {
		w.startImports(ctx, gv)
	}
	watched := w.informers
	w.mu.Unlock()
	if !w.waitSynced(ctx, watched) {
		return
	}
	w.ready.Store(true)
	close(w.synced)
	go w.returnSyncGarbage(ctx)
	if served {
		log.Infof("synced with the Kubernetes API at %s as cluster %q (ServiceImport %s)", w.cl.host, cluster, gv.Version)
	} else {
		log.Warningf("synced with the Kubernetes API at %s as cluster %q, which serves no ServiceImport (%s): no imports until the MCS API CRDs are installed; checking every %s", w.cl.host, cluster, mcsv1b1.GroupName, w.importPoll)
		go w.awaitImports(ctx)
	}
	w.watchStale(ctx)
}

// returnSyncGarbage gives the OS back the memory the initial lists leave
// free: every object decoded, of which trim kept a small struct. Go keeps
// freed memory for the heap to grow into, up to twice what is live
// (GOGC), so a server that answers little would hold most of it for good:
// on make bench's objects, 21 of the process's 141 MiB. Under load the
// heap grows back towards that bound, and no further.
//
// It waits for the server's other plugins (the member Corefile's
// kubernetes plugin) to sync as well: they list into the same heap, and
// memory returned while one still lists is taken again at once, with the
// next collection put off, so that the heap peaks higher than it would
// have (make bench's member Corefile process, 420–441 MiB in four runs
// against stock kubeadm CoreDNS's 377–394). A plugin that has not synced
// within peersBound leaves the memory to the Go runtime.
func (w *watcher) returnSyncGarbage(ctx context.Context) {
	err := wait.PollUntilContextTimeout(ctx, w.peerPoll, peersBound, true, func(context.Context) (bool, error) {
		return !slices.ContainsFunc(w.peers, func(p ready.Readiness) bool { return !p.Ready() }), nil
	})
	if err == nil {
		w.freeMemory()
	}
}

// waitSynced waits until the handlers of ws have seen their initial lists.
func (w *watcher) waitSynced(ctx context.Context, ws []watched) bool {
	if !cache.WaitForCacheSync(ctx.Done(), registrationsSynced(ws)...) {
		return false
	}
	for _, inf := range ws {
		informersSynced.WithLabelValues(inf.resource).Set(1)
	}
	return true
}

// awaitImports starts the ServiceImport informer once the API server serves
// ServiceImports: a cluster without the MCS API is one without imports,
// until the CRDs are installed.
func (w *watcher) awaitImports(ctx context.Context) {
	var gv schema.GroupVersion
	// An unreachable API server shows in api_status, not here.
	err := wait.PollUntilContextCancel(ctx, w.importPoll, false, func(context.Context) (bool, error) {
		v, served, err := w.importVersion()
		gv = v
		return err == nil && served, nil
	})
	if err != nil {
		return // stopped
	}
	w.mu.Lock()
	if ctx.Err() != nil { // stopped: the factories are shut down
		w.mu.Unlock()
		return
	}
	n := len(w.informers)
	w.startImports(ctx, gv)
	imports := w.informers[n:]
	w.mu.Unlock()
	if w.waitSynced(ctx, imports) {
		log.Infof("ServiceImport %s is served now: answering imports", gv.Version)
	}
}

// apiChanged logs how the API server answers, each time that changes.
func (w *watcher) apiChanged(s apiStatus, why string) {
	then := "answering from the last known state"
	if !w.ready.Load() {
		then = "not synced: native names go to the next plugin, clusterset names answer SERVFAIL"
	}
	switch s {
	case apiOK:
		log.Infof("the Kubernetes API at %s answers again", w.cl.host)
	case apiForbidden:
		log.Errorf("the Kubernetes API at %s refuses mcs's credentials (%s): see the permissions in mcs's README; %s", w.cl.host, why, then)
	case apiUnreachable:
		log.Errorf("cannot reach the Kubernetes API at %s (%s); %s", w.cl.host, why, then)
	}
}

func registrationsSynced(ws []watched) []cache.InformerSynced {
	out := make([]cache.InformerSynced, 0, len(ws))
	for _, w := range ws {
		out = append(out, w.reg.HasSynced)
	}
	return out
}

// prepare learns what the informers need, retrying with backoff while the
// API server cannot be reached; it returns an error only when ctx ends.
// served is false when the API server serves no ServiceImport.
func (w *watcher) prepare(ctx context.Context) (cluster string, gv schema.GroupVersion, served bool, err error) {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 30 * time.Second}
	for {
		cluster, err = w.clusterName(ctx)
		if err == nil {
			gv, served, err = w.importVersion()
		}
		if err == nil {
			return cluster, gv, served, nil
		}
		if errors.Is(err, errConfig) {
			select {
			case w.fatal <- err:
			default:
			}
		}
		log.Errorf("waiting for the Kubernetes API at %s: %v", w.cl.host, err)
		select {
		case <-ctx.Done():
			return "", gv, false, ctx.Err()
		case <-time.After(backoff.Step()):
		}
	}
}

// startInformers watches everything answers need but ServiceImports (see
// startImports). Every factory trims objects to the small structs of
// objects.go before they are stored. Called with w.mu held.
func (w *watcher) startInformers(ctx context.Context) {
	kube := informers.NewSharedInformerFactoryWithOptions(w.cl.kube, 0, informers.WithTransform(trimmer(w.keepZones)))
	w.watch("services", servicesInformer(kube), handler.Typed(w.idx.setService))
	w.watch("endpointslices", slicesInformer(kube), handler.Typed(w.idx.setSlice))
	w.watch("namespaces", namespacesInformer(kube), handler.Typed(w.idx.setNamespace))
	w.watch("leases", leasesInformer(kube), handler.Typed(w.idx.setLease))
	kube.Start(ctx.Done())
	w.factories = append(w.factories, kube)
}

// startImports watches the ServiceImports of version gv. Called with w.mu
// held.
func (w *watcher) startImports(ctx context.Context, gv schema.GroupVersion) {
	mcs := mcsinformers.NewSharedInformerFactoryWithOptions(w.cl.mcs, 0, mcsinformers.WithTransform(trim))
	w.watch("serviceimports", importsInformer(mcs, gv == mcsv1b1.SchemeGroupVersion), handler.Typed(w.idx.setImport))
	mcs.Start(ctx.Done())
	w.factories = append(w.factories, mcs)
}

func (w *watcher) watch(resource string, inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	reg, err := inf.AddEventHandler(h)
	if err != nil { // only when the informer has stopped, which it has not
		log.Errorf("watching %s: %v", resource, err)
		return
	}
	w.informers = append(w.informers, watched{resource: resource, reg: reg})
}

// watchStale keeps the stale-clusters gauge current and logs clusters going
// stale and coming back: Leases expire by the clock, without an event.
func (w *watcher) watchStale(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	was := map[string]bool{}
	for {
		now := map[string]bool{}
		for _, cluster := range w.idx.staleAt(time.Now()) {
			now[cluster] = true
			if !was[cluster] {
				log.Warningf("source cluster %q is stale: its Lease %s%s has expired; its endpoints are used only when no other is left", cluster, api.LeasePrefix, cluster)
			}
		}
		for cluster := range was {
			if !now[cluster] {
				log.Infof("source cluster %q is no longer stale", cluster)
			}
		}
		was = now
		staleClusters.Set(float64(len(now)))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
