package members

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// A member may export at most maxExports services (--member-max-exports):
// each costs every consumer a derived Service, whose VIP comes from the
// consumer's Service CIDR. Past the bound, its newest exports are not
// used, so that the services it already provides stay imported. Its
// exports are ranked by their creationTimestamp, which the member
// reports: it orders the member's own exports only.
//
// Only exports that can be used count: one the member may not make (its
// namespace is not allowed, or the service is protected: Handlers.Allowed)
// or with no Service behind it (none, or an ExternalName) is used by no
// sync, so a tenant's junk cannot push out the member's newer exports that
// can. Whether an export counts is decided afresh from the caches at every
// change that may tell: of the export, of the Service of its name, of what
// Allowed says (RecountExports).

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

// has reports whether key counts.
func (q *exportQuota) has(key string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.made[key]
	return ok
}

// refused is how many exports are past the bound.
func (q *exportQuota) refused() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return max(0, len(q.made)-q.max)
}

// set records an export counted from t, or no longer counted (gone), and
// returns the other export, if any, that the change moved across the
// bound: its service must be synced again.
func (q *exportQuota) set(key string, t metav1.Time, gone bool) string {
	return q.update(key, func() (metav1.Time, bool) { return t, !gone })
}

// update is set with what state says of key, read under q's lock: of
// concurrent changes of key, the last decides from what is then true. A
// member past its bound pays for sorting its exports.
func (q *exportQuota) update(key string, state func() (made metav1.Time, counted bool)) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	before := q.boundary()
	if t, counted := state(); counted {
		q.made[key] = t
	} else {
		delete(q.made, key)
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

// countExport decides afresh whether the export namespace/name counts
// (see above), and returns the key of the export the change moved across
// the bound, or "".
func (c *caches) countExport(m *Member, allowed func(m *Member, namespace, name string) bool, namespace, name string) string {
	return c.quota.update(namespace+"/"+name, func() (metav1.Time, bool) { return c.counts(m, allowed, namespace, name) })
}

// counts reports whether the export namespace/name counts, and when it
// was made.
func (c *caches) counts(m *Member, allowed func(m *Member, namespace, name string) bool, namespace, name string) (metav1.Time, bool) {
	e, ok := c.exports.Get(namespace, name).(metav1.Object)
	if !ok || !c.backed(namespace, name) || allowed != nil && !allowed(m, namespace, name) {
		return metav1.Time{}, false
	}
	return e.GetCreationTimestamp(), true
}

// backed reports whether the member has a Service namespace/name that an
// export can export: not an ExternalName.
func (c *caches) backed(namespace, name string) bool {
	s, ok := Unpacked(c.services.Get(namespace, name)).(*corev1.Service)
	return ok && s.Spec.Type != corev1.ServiceTypeExternalName
}

// RecountExports decides afresh whether each of the member's exports in
// namespace counts against its quota, as what Handlers.Allowed says of
// the namespace changed; it returns the keys of the exports that moved
// across the bound, whose services must be synced again. Only those whose
// count changes pay for the quota's lock and sort.
func (m *Member) RecountExports(namespace string, allowed func(m *Member, namespace, name string) bool) []string {
	c := m.current()
	if c == nil {
		return nil
	}
	var moved []string
	for _, k := range c.exports.Keys() {
		ns, name, err := cache.SplitMetaNamespaceKey(k)
		if err != nil || ns != namespace {
			continue
		}
		if _, counts := c.counts(m, allowed, ns, name); counts == c.quota.has(k) {
			continue
		}
		if k := c.countExport(m, allowed, ns, name); k != "" {
			moved = append(moved, k)
		}
	}
	return moved
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
