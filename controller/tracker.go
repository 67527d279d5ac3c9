package controller

import (
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// trackTTL bounds how long a write is remembered: far longer than an
// informer takes to deliver it, short enough that a lost event heals.
const trackTTL = 30 * time.Second

// tracker remembers what this controller wrote until the informer caches
// catch up. A sync that runs before its previous write reached the cache
// then compares against what it wrote, rather than writing it again or
// failing on a stale resourceVersion: one write per change.
type tracker struct {
	mu    sync.Mutex
	objs  map[trackKey]tracked
	swept time.Time
	clock clock.PassiveClock
	// unseen is told of each write swept before its informer delivered
	// it (see sweepLocked).
	unseen func(k trackKey, w tracked)
}

type trackKey struct{ cluster, kind, namespace, name string }

type tracked struct {
	obj     metav1.Object // nil: deleted
	deleted types.UID     // the UID deleted, when obj is nil
	at      time.Time
	// service is the key of the service the write was for; seen whether
	// the informer delivered it.
	service string
	seen    bool
}

func newTracker(clk clock.PassiveClock, unseen func(trackKey, tracked)) *tracker {
	return &tracker{objs: map[trackKey]tracked{}, clock: clk, unseen: unseen}
}

// wrote records obj, written under k for the service of key service.
func (t *tracker) wrote(k trackKey, obj metav1.Object, service string) {
	t.put(k, tracked{obj: obj, service: service})
}

func (t *tracker) deleted(k trackKey, uid types.UID) { t.put(k, tracked{deleted: uid}) }

// put records a write. Entries are dropped when next looked up; those never
// looked up again (a deleted slice's name) are swept once per trackTTL.
func (t *tracker) put(k trackKey, w tracked) {
	t.mu.Lock()
	w.at = t.clock.Now()
	t.objs[k] = w
	unseen := t.sweepLocked(w.at)
	t.mu.Unlock()
	t.tell(unseen)
}

// sweep drops what was written more than trackTTL ago, once per trackTTL.
// An initial sync leaves what it wrote in its last half minute, which no
// later write may come to sweep: the controller calls it every trackTTL.
func (t *tracker) sweep() {
	t.mu.Lock()
	unseen := t.sweepLocked(t.clock.Now())
	t.mu.Unlock()
	t.tell(unseen)
}

// sweepLocked drops the entries older than trackTTL, and returns the
// writes among them that the informer never delivered: an object made
// and deleted by someone else between two lists of a relisting informer,
// which the sync took for present until now, and nothing else queues its
// service to make anew; or an echo delivered before the write was
// recorded.
func (t *tracker) sweepLocked(now time.Time) map[trackKey]tracked {
	if now.Sub(t.swept) < trackTTL {
		return nil
	}
	t.swept = now
	var unseen map[trackKey]tracked
	for k, w := range t.objs {
		if now.Sub(w.at) <= trackTTL {
			continue
		}
		delete(t.objs, k)
		if w.obj != nil && !w.seen && w.service != "" {
			if unseen == nil {
				unseen = map[trackKey]tracked{}
			}
			unseen[k] = w
		}
	}
	return unseen
}

func (t *tracker) tell(unseen map[trackKey]tracked) {
	if t.unseen == nil {
		return
	}
	for k, w := range unseen {
		t.unseen(k, w)
	}
}

// latest is the newest of what the cache holds and what was written; nil
// when the object is absent or known to be deleted.
func (t *tracker) latest(k trackKey, cached metav1.Object) metav1.Object {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.objs[k]
	if !ok {
		return cached
	}
	if t.clock.Since(w.at) > trackTTL {
		delete(t.objs, k)
		return cached
	}
	if w.obj == nil { // deleted by us
		if cached != nil && cached.GetUID() == w.deleted {
			return nil
		}
		delete(t.objs, k)
		return cached
	}
	if cached != nil && newerOrSame(cached, w.obj) {
		delete(t.objs, k)
		return cached
	}
	return w.obj
}

// latestOf is t.latest for a typed object: the newer of the cached one (a
// nil pointer when absent) and what this controller last wrote under k,
// which the tracker holds packed as the caches do (members.Trim).
func latestOf[P interface {
	*E
	metav1.Object
}, E any](t *tracker, k trackKey, cached P) P {
	var c metav1.Object
	if cached != nil {
		c = cached
	}
	out, _ := members.Unpacked(t.latest(k, c)).(P)
	return out
}

// newerOrSame compares resourceVersions, which etcd-backed API servers make
// integers that grow across all objects of a resource; anything else
// counts as newer, so the cache is trusted. Objects of different UIDs are
// compared too: a cache that still holds the Service this controller
// deleted and made anew is older than what it wrote.
func newerOrSame(a, b metav1.Object) bool {
	ra, errA := strconv.ParseUint(a.GetResourceVersion(), 10, 64)
	rb, errB := strconv.ParseUint(b.GetResourceVersion(), 10, 64)
	if errA != nil || errB != nil {
		return true
	}
	return ra >= rb
}

// delivered is told what an informer delivered under k (gone: a
// deletion), and reports whether it is the controller's own last write,
// which needs no sync. Once the cache has seen the write, or anything
// newer, deleted, the cache is the truth and the write is forgotten, as
// Kubernetes' EndpointSlice tracker forgets a deleted slice: a deletion by
// someone else then reads as one, and the sync makes the object anew. A
// write the cache holds stays remembered until latest is next asked: a
// sync may have read the cache just before it arrived there. Only
// resourceVersions are compared, which cost no decoding of a packed
// object: within a resource they name one write.
func (t *tracker) delivered(k trackKey, obj metav1.Object, gone bool) (echo bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w, ok := t.objs[k]
	switch {
	case !ok:
		return false
	case w.obj == nil: // deleted by us: the cache holds nothing once it saw a deletion
		if gone {
			delete(t.objs, k)
		}
		return false
	case !newerOrSame(obj, w.obj):
		return false // an older state, or the object deleted before ours was made
	case gone:
		delete(t.objs, k)
		return false
	}
	w.seen = true // delivered, or something newer
	t.objs[k] = w
	return obj.GetResourceVersion() == w.obj.GetResourceVersion()
}
