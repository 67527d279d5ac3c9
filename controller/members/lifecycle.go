package members

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
)

// The life of a member's informers is one state machine, changed only by
// the functions of this file, each under m.mu:
//
//	none ──install──▶ serving ──freshCaches──▶ serving + fresh ──swap──▶ serving
//	                     │  (cut off, or a new selector)  └──cutOffNow: fresh stopped
//	any caches ──overflow──▶ overflowed ──overflowRetry──▶ none
//	any state ───refuse───▶ overflowed
//
// Caches are put in place (install, freshCaches) before they start, and
// only in the state they were made for: an overflow, which only started
// informers report, always finds them in place and takes them out, so
// that no caches stopped while they listed are ever read or swapped in
// (they would count as synced with what they held when they stopped, and
// renew the member's Leases from it), and none are put in place past an
// overflow. A refusal of an answer (responses.go) may come from any
// request, the caches' or not, and takes out whatever is in place.

// lifecycle is what the probe decides by, read at once.
type lifecycle struct {
	started, reachable, cutOff bool
	overflow                   error
}

func (m *Member) lifecycle() lifecycle {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.overflowErr != nil && m.clock.Now().After(m.overflowUntil) {
		m.overflowErr = nil
	}
	return lifecycle{started: m.caches != nil, reachable: m.reachable, cutOff: m.cutOff, overflow: m.overflowErr}
}

// install puts the member's first caches in place, made for the MCS API
// versions given, and starts them.
func (m *Member) install(c *caches, exports, imports schema.GroupVersion) error {
	m.mu.Lock()
	if m.caches != nil || m.overflowErr != nil {
		m.mu.Unlock()
		c.stop()
		return errors.New("its informers changed while new ones were made")
	}
	// Readers take the caches under mu: they are published with the
	// versions they were made for.
	m.caches, m.exports, m.imports = c, exports, imports
	m.mu.Unlock()
	c.start()
	return nil
}

// freshCaches are the informers being listed anew, made and started if
// none are.
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
	if m.fresh != nil || m.caches == nil {
		m.mu.Unlock()
		fresh.stop()
		return nil, errors.New("its informers changed while new ones were made")
	}
	m.fresh = fresh
	m.mu.Unlock()
	fresh.start()
	return fresh, nil
}

// swap puts the fresh informers in place of the old ones, which stop.
// Fresh informers that were stopped while they listed (the member
// overflowed, or was cut off again) are no longer m.fresh, and not put in
// place.
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
	return fresh.handle(m, h)
}

// answered notes that the member answered a probe: its watches work.
func (m *Member) answered() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cutOff = false
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

// overflowRetry is how long a member whose informers held more objects
// than it may make the controller hold counts as unreachable before it is
// listed again: each list of a member that large costs the memory the
// bound is there to protect.
const overflowRetry = 10 * time.Minute

// overflow stops caches c, which hold more (over) than the member may
// make the controller hold, and every other caches of the member: the
// member counts as unreachable, so what it provided stays as it is, as
// for any member whose objects are unknown, until it is listed again
// after overflowRetry.
func (m *Member) overflow(c *caches, over string) {
	err := fmt.Errorf("%s holds %s: its informers are stopped, to be listed again in %s", m.Name, over, overflowRetry)
	if m.takeOut(c, err) {
		klog.ErrorS(err, "Member holds too many objects", "cluster", m.Name, "source", m.Source)
	}
}

// refuse takes the member out as overflow does, whatever caches it has,
// for an answer of its API server past its bound (responses.go): any
// request may be the one, and a member that answers so is not an API
// server whose lists are worth the memory.
func (m *Member) refuse(refusal error) {
	err := fmt.Errorf("%w; its informers are stopped, to be listed again in %s", refusal, overflowRetry)
	m.takeOut(nil, err)
	klog.ErrorS(err, "Member's answer refused", "cluster", m.Name, "source", m.Source)
}

// takeOut stops the member's caches and counts it as unreachable with err
// until overflowRetry passes; when c is not nil, only if c is still
// in place. It reports whether it took the member out.
func (m *Member) takeOut(c *caches, err error) bool {
	m.mu.Lock()
	if c != nil && m.caches != c && m.fresh != c {
		m.mu.Unlock()
		return false // already taken out
	}
	stopped := []*caches{m.caches, m.fresh}
	m.caches, m.fresh = nil, nil
	m.overflowErr, m.overflowUntil = err, m.clock.Now().Add(overflowRetry)
	m.mu.Unlock()
	for _, s := range stopped {
		if s != nil {
			s.stop()
		}
	}
	return true
}
