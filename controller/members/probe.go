package members

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// ReadyFunc asks a member's API server whether it is ready.
type ReadyFunc func(ctx context.Context, m *Member) error

// Readyz is the probe of a real API server: GET /readyz.
func Readyz(ctx context.Context, m *Member) error {
	return m.Control.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// start probes the member and, once it answers, discovers its MCS API
// version and starts its informers. It returns at once; stop ends it all.
func (m *Member) start(h Handlers, every time.Duration, ready ReadyFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	if m.Kube == nil { // broken registration: nothing to run
		close(m.done)
		return
	}
	go func() {
		defer close(m.done)
		wait.UntilWithContext(ctx, func(ctx context.Context) { m.probe(ctx, h, ready) }, every)
	}()
}

func (m *Member) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
}

// failureThreshold is how many probes in a row must fail before a member
// that answered counts as unreachable: an API server under load can fail
// one readiness check while it serves.
const failureThreshold = 2

// probe checks that the member's API server is ready; the first success
// starts the informers, and a success after the member was cut off lists
// it afresh. Transitions are logged and reported to h.Changed.
func (m *Member) probe(ctx context.Context, h Handlers, ready ReadyFunc) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := ready(pctx, m)
	l := m.lifecycle()
	switch {
	case err != nil:
		var answered apierrors.APIStatus
		if !errors.As(err, &answered) {
			m.cutOffNow()
		}
	case l.overflow != nil:
		err = l.overflow
	case !l.started:
		err = m.startInformers(ctx, h)
	case l.reachable || !l.cutOff:
		// Reachable, or unreachable by checks it failed but answered: its
		// watches kept working.
		m.answered()
		err = m.reselect(ctx, h)
	default:
		err = m.relist(ctx, h)
	}
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	was, first := m.reachable, !m.probed
	m.failures++
	if err == nil {
		m.failures = 0
	}
	m.reachable, m.lastErr, m.probed = err == nil || (was && m.failures < failureThreshold), err, true
	now, failures := m.reachable, m.failures
	m.mu.Unlock()
	// The probe that first finds it unhealthy counts as healthy too: the
	// Leases were renewed until then.
	healthy := m.Healthy()
	m.mu.Lock()
	if healthy || m.healthyAtProbe {
		m.lastHealthy = m.clock.Now()
	}
	m.healthyAtProbe = healthy
	m.mu.Unlock()
	if !m.candidate {
		m.report(now)
	}
	switch {
	case was && !now:
		klog.ErrorS(err, "Member became unreachable", "cluster", m.Name, "source", m.Source)
	case err != nil:
		klog.V(2).ErrorS(err, "Member failed a probe", "cluster", m.Name, "source", m.Source, "inARow", failures)
	case !was:
		klog.InfoS("Member reachable", "cluster", m.Name, "source", m.Source)
	}
	// The first probe settles a member that does not answer (Settled):
	// that is news too.
	if (was != now || first) && h.Changed != nil {
		h.Changed(m.Name)
	}
}

// report sets the member's gauges, as of a probe that found it reachable
// or not.
func (m *Member) report(reachable bool) {
	reachableGauge.WithLabelValues(m.Name).Set(boolGauge(reachable))
	if c := m.current(); c != nil {
		objectsGauge.WithLabelValues(m.Name).Set(float64(c.held.Load()))
		if m.maxObjects > 0 {
			objectsLimitGauge.WithLabelValues(m.Name).Set(float64(m.maxObjects))
		}
		bytesGauge.WithLabelValues(m.Name).Set(float64(c.bytes.Load()))
		exportsRefusedGauge.WithLabelValues(m.Name).Set(float64(c.quota.refused()))
	}
}

// ProbedOnce reports whether the member was probed yet.
func (m *Member) ProbedOnce() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.probed
}

// startInformers discovers which MCS API version the member serves and
// starts every informer the controller reads. A member without the MCS API
// CRDs is an error here: it is retried at the next probe.
func (m *Member) startInformers(ctx context.Context, h Handlers) error {
	m.learnIdentity(ctx)
	exports, err := served(m, mcsapi.ServiceExports)
	if err != nil {
		return err
	}
	imports, err := served(m, mcsapi.ServiceImports)
	if err != nil {
		return err
	}
	c, err := newCaches(ctx, m, exports, imports)
	if err != nil {
		return err
	}
	if err := m.install(c, exports, imports); err != nil {
		return err
	}
	if err := c.handle(m, h); err != nil {
		return err
	}
	go func() {
		if cache.WaitForCacheSync(c.done, c.synced()...) {
			klog.InfoS("Member synced", "cluster", m.Name, "serviceExport", exports.Version, "serviceImport", imports.Version)
			if h.Changed != nil {
				h.Changed(m.Name)
			}
		}
	}()
	return nil
}

// relistWait is how long a probe waits for a member's fresh list before
// it says the member is still being listed; the next probe looks again.
const relistWait = 5 * time.Second

// relist brings back a member that answers again after it was unreachable
// and cut off: new informers list it, and replace the old ones once they
// have. The old informers would see what changed meanwhile only after
// client-go's watch back-off, up to a minute, and the member must not count
// as reachable again, nor its Lease be renewed, from what was seen before
// the outage. Handlers join after the swap, so no sync reads the old caches
// for the new informers' events.
func (m *Member) relist(ctx context.Context, h Handlers) error {
	fresh, err := m.freshCaches(ctx)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, relistWait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), fresh.synced()...) {
		return errors.New("listing its objects afresh after it was unreachable")
	}
	return m.swap(fresh, h)
}

// reselect lists the member afresh when its informers were made with
// another label selector than the registry's now (a shard taken over).
// The old informers serve until the new ones have listed: what the
// member holds of the shards held before stays known throughout.
func (m *Member) reselect(ctx context.Context, h Handlers) error {
	if c := m.current(); c == nil || c.selector == m.wantedSelector() {
		return nil
	}
	fresh, err := m.freshCaches(ctx)
	if err != nil || !fresh.hasSynced() {
		return err // the next probe looks again
	}
	return m.swap(fresh, h)
}
