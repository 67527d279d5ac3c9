package members

import (
	"context"
	"errors"
	"fmt"
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
	over := m.overflowed()
	m.mu.RLock()
	started, reachable, cutOff := m.caches != nil, m.reachable, m.cutOff
	m.mu.RUnlock()
	switch {
	case err != nil:
		var answered apierrors.APIStatus
		if !errors.As(err, &answered) {
			m.cutOffNow()
		}
	case over != nil:
		err = over
	case !started:
		err = m.startInformers(ctx, h)
	case reachable || !cutOff:
		// Reachable, or unreachable by checks it failed but answered: its
		// watches kept working.
		m.setCutOff(false)
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
	reachableGauge.WithLabelValues(m.Name).Set(boolGauge(now))
	if c := m.current(); c != nil {
		objectsGauge.WithLabelValues(m.Name).Set(float64(c.held.Load()))
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

func (m *Member) setCutOff(v bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutOff = v
}

// cutOffNow marks the member cut off, and stops a fresh list that the
// failed probe interrupted: its informers would wait out their back-off
// too. It starts anew when the member answers.
func (m *Member) cutOffNow() {
	m.mu.Lock()
	fresh := m.fresh
	m.cutOff, m.fresh = true, nil
	m.mu.Unlock()
	if fresh != nil {
		fresh.stop()
	}
}

// startInformers discovers which MCS API version the member serves and
// starts every informer the controller reads. A member without the MCS API
// CRDs is an error here: it is retried at the next probe.
func (m *Member) startInformers(ctx context.Context, h Handlers) error {
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
	// Readers take the caches under mu: they are published with the
	// versions they were made for.
	m.mu.Lock()
	m.caches, m.exports, m.imports = c, exports, imports
	m.mu.Unlock()
	if err := c.handle(m.Name, h); err != nil {
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

// freshCaches are the informers being listed anew, started if none are.
func (m *Member) freshCaches(ctx context.Context) (*caches, error) {
	m.mu.Lock()
	fresh, exports, imports := m.fresh, m.exports, m.imports
	m.mu.Unlock()
	if fresh != nil {
		return fresh, nil
	}
	fresh, err := newCaches(ctx, m, exports, imports)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.fresh = fresh
	m.mu.Unlock()
	return fresh, nil
}

// swap puts the fresh informers in place of the old ones, which stop.
// Fresh informers that were stopped while they listed (the member
// overflowed, or was cut off again) are not put in place: they would
// count as synced with what they held when they stopped, and renew the
// member's Leases from it. The old ones may be gone already (overflow).
func (m *Member) swap(fresh *caches, h Handlers) error {
	m.mu.Lock()
	if m.fresh != fresh {
		m.mu.Unlock()
		return errors.New("its informers were stopped while they listed it afresh")
	}
	old := m.caches
	m.caches, m.fresh, m.cutOff = fresh, nil, false
	m.mu.Unlock()
	if old != nil {
		old.stop()
	}
	return fresh.handle(m.Name, h)
}

// overflowRetry is how long a member whose informers held more objects
// than it may make the controller hold counts as unreachable before it is
// listed again: each list of a member that large costs the memory the
// bound is there to protect.
const overflowRetry = 10 * time.Minute

// overflow stops caches c, which hold more objects than the member may
// make the controller hold. The member counts as unreachable, so what it
// provided stays as it is, as for any member whose objects are unknown,
// until it is listed again after overflowRetry.
func (m *Member) overflow(c *caches) {
	err := fmt.Errorf("%s holds more than %d objects (its Services, EndpointSlices, Namespaces, ServiceExports and ServiceImports together; --member-max-objects): its informers are stopped, to be listed again in %s", m.Name, c.max, overflowRetry)
	m.mu.Lock()
	if m.caches == c {
		m.caches = nil
	}
	if m.fresh == c {
		m.fresh = nil
	}
	m.overflowErr, m.overflowUntil = err, time.Now().Add(overflowRetry)
	m.mu.Unlock()
	c.stop()
	klog.ErrorS(err, "Member holds too many objects", "cluster", m.Name, "source", m.Source)
}

// overflowed is the error of a member whose informers held too many
// objects, until it may be listed again.
func (m *Member) overflowed() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.overflowErr != nil && time.Now().After(m.overflowUntil) {
		m.overflowErr = nil
	}
	return m.overflowErr
}
