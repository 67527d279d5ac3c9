package members

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/coredns-mcs/coredns-mcs/api/handler"
)

// A member may export at most maxExports services (--member-max-exports):
// each costs every consumer a derived Service, whose VIP comes from the
// consumer's Service CIDR. Past the bound, its newest exports are not
// used, so that the services it already provides stay imported. Its
// exports are ranked by their creationTimestamp, which the member
// reports: it orders the member's own exports only.

// exportQuota holds when each of a member's ServiceExports was made.
type exportQuota struct {
	max  int // 0: no bound
	mu   sync.Mutex
	made map[string]metav1.Time // by namespace/name
}

// rank orders two exports by creation, then key: the oldest first.
func rank(a, b string, ta, tb metav1.Time) int {
	return cmp.Or(ta.Compare(tb.Time), cmp.Compare(a, b))
}

// over reports whether key is an export past the bound: at least max of
// the member's exports are older. Only a member past its bound pays for
// the count.
func (q *exportQuota) over(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.made[key]
	if q.max <= 0 || !ok || len(q.made) <= q.max {
		return false
	}
	older := 0
	for k, tk := range q.made {
		if rank(k, key, tk, t) < 0 {
			older++
		}
	}
	return older >= q.max
}

// refused is how many exports are past the bound.
func (q *exportQuota) refused() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(0, len(q.made)-q.max)
}

// set records an export made (t) or deleted (gone), and returns the other
// export, if any, that the change moved across the bound: its service
// must be synced again. A member past its bound pays for sorting its
// exports.
func (q *exportQuota) set(key string, t metav1.Time, gone bool) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	before := q.boundary()
	if gone {
		delete(q.made, key)
	} else {
		q.made[key] = t
	}
	after := q.boundary()
	// before was the oldest export past the bound, after is now.
	refusedNow := func(k string) bool { return after != "" && q.compare(k, after) >= 0 }
	refusedBefore := func(k string) bool { return before != "" && q.compare(k, before) >= 0 }
	switch {
	case before != after && before != "" && before != key && !refusedNow(before):
		return before
	case before != after && after != "" && after != key && !refusedBefore(after):
		return after
	}
	return ""
}

func (q *exportQuota) compare(a, b string) int { return rank(a, b, q.made[a], q.made[b]) }

// boundary is the oldest export past the bound, or "".
func (q *exportQuota) boundary() string {
	if q.max <= 0 || len(q.made) <= q.max {
		return ""
	}
	return slices.SortedFunc(maps.Keys(q.made), q.compare)[q.max]
}

// note records what the exports informer delivered, and returns the
// cached export the change moved across the bound, or nil.
func (q *exportQuota) note(exports Scoped, obj any, gone bool) any {
	o, ok := handler.Unwrap(obj).(metav1.Object)
	if !ok {
		return nil
	}
	k := q.set(cache.MetaObjectToName(o).String(), o.GetCreationTimestamp(), gone)
	if ns, name, err := cache.SplitMetaNamespaceKey(k); k != "" && err == nil {
		return exports.Get(ns, name)
	}
	return nil
}

// OverQuota says why the member's export of namespace/name is not used,
// or "": it is past the member's bound on exports.
func (m *Member) OverQuota(namespace, name string) string {
	c := m.current()
	if c == nil || !c.quota.over(namespace+"/"+name) {
		return ""
	}
	return fmt.Sprintf("%s exports more than %d services (--member-max-exports), and this one is among its newest: it is not used until older ones are deleted", m.Name, c.quota.max)
}
