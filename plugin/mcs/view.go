package mcs

import (
	"cmp"
	"slices"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// view is the immutable snapshot of one service that queries read. Slice
// lists hold only slices with at least one ready endpoint, sorted so answers
// come out in a stable order.
type view struct {
	key      svcKey
	svc      *service       // nil: no Service of that name in this cluster
	imp      *serviceImport // nil: not imported
	strategy api.Strategy   // "": native names are not multi-cluster for this service

	local    []*endpointSlice // L: this cluster's own slices
	remote   []*endpointSlice // R: imported slices of other clusters
	imported []*endpointSlice // every imported slice, this cluster's included (clusterset answers)
	union    []*endpointSlice // L ∪ R
}

func newView(k svcKey, e *entry, self string, fallback api.Strategy) *view {
	v := &view{key: k, svc: e.svc, imp: e.imp}
	if e.imp != nil {
		v.strategy = cmp.Or(e.imp.strategy, fallback)
	}
	for _, s := range e.slices { // sorted by name
		switch {
		case s.count() == 0:
		case !s.imported:
			v.local = append(v.local, s)
		default:
			v.imported = append(v.imported, s)
		}
	}
	slices.SortFunc(v.imported, byClusterThenName)
	// A view never changes, so the lists that hold the same slices share
	// one array: remote is imported but for this cluster's own, and union
	// is remote when there is no local slice.
	fromSelf := func(s *endpointSlice) bool { return s.cluster == self }
	v.remote = v.imported
	if slices.ContainsFunc(v.imported, fromSelf) {
		v.remote = slices.DeleteFunc(slices.Clone(v.imported), fromSelf)
	}
	v.union = v.remote
	if len(v.local) > 0 {
		v.union = slices.Concat(v.local, v.remote)
	}
	return v
}

func byClusterThenName(a, b *endpointSlice) int {
	return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.name, b.name))
}

// native reports whether this service's cluster.local names are answered by mcs.
func (v *view) native() bool { return v != nil && v.strategy != "" }

func (v *view) hasLocalVIP() bool { return v.svc != nil && len(v.svc.ips) > 0 }

// minReady is the fewest ready local endpoints that answer under
// LocalFirst.
func (v *view) minReady() int   { return max(v.imp.minReady, 1) }
func (v *view) hasSetVIP() bool { return v.imp != nil && len(v.imp.ips) > 0 }

// headless follows the import's type: it is what the MultiClusterService
// propagated; a consumption-only cluster has no Service to look at.
func (v *view) headless() bool { return v.imp != nil && v.imp.headless }

// hasEndpointsIn reports whether a headless import has endpoints in
// cluster: <cluster>.<svc>.<ns>.svc.<clusterset zone> then has names below it.
func (v *view) hasEndpointsIn(cluster string) bool {
	if !v.headless() {
		return false
	}
	for _, s := range v.imported {
		if s.cluster == cluster {
			return true
		}
	}
	return false
}

// hasProtocol reports whether a named port of the import (of its slices,
// when headless) speaks proto: _<proto>.<svc>… then has SRV names below it.
func (v *view) hasProtocol(proto string) bool {
	if !v.headless() {
		return hasNamedProtocol(v.imp.ports, proto)
	}
	for _, s := range v.imported {
		if hasNamedProtocol(s.ports, proto) {
			return true
		}
	}
	return false
}

// hasNamedProtocol: only named ports have SRV names (KEP-1645 §2.3.2).
func hasNamedProtocol(ports []port, proto string) bool {
	for _, p := range ports {
		if p.name != "" && p.protocol == proto {
			return true
		}
	}
	return false
}

// candidates are the endpoints one native query may be answered with: L,
// and R split into fresh and stale source clusters (expired Lease),
// restricted to host if set.
type candidates struct {
	local, fresh, stale, union []*endpointSlice
}

// split gives the candidates of one query. The common case (all names, no
// stale cluster) reuses the view's lists and allocates nothing.
func (v *view) split(x *index, host string, now time.Time) candidates {
	if host == "" && !v.anyStale(x, v.remote, now) {
		return candidates{local: v.local, fresh: v.remote, union: v.union}
	}
	var c candidates
	c.local = withHost(v.local, host)
	for _, sl := range withHost(v.remote, host) {
		if x.stale(sl.cluster, now) {
			c.stale = append(c.stale, sl)
		} else {
			c.fresh = append(c.fresh, sl)
		}
	}
	c.union = append(append([]*endpointSlice{}, c.local...), c.fresh...)
	return c
}

// splitImported is split for clusterset answers: every imported slice,
// this cluster's own included, with stale clusters split out.
func (v *view) splitImported(x *index, now time.Time) (fresh, stale []*endpointSlice) {
	if !v.anyStale(x, v.imported, now) {
		return v.imported, nil
	}
	for _, sl := range v.imported {
		if x.stale(sl.cluster, now) {
			stale = append(stale, sl)
		} else {
			fresh = append(fresh, sl)
		}
	}
	return fresh, stale
}

func (v *view) anyStale(x *index, ss []*endpointSlice, now time.Time) bool {
	for _, s := range ss {
		if x.stale(s.cluster, now) {
			return true
		}
	}
	return false
}

func withHost(ss []*endpointSlice, host string) []*endpointSlice {
	if host == "" {
		return ss
	}
	var out []*endpointSlice
	for _, s := range ss {
		if s.hasHost(host) {
			out = append(out, s)
		}
	}
	return out
}

// firstNonEmpty is the stale rule: stale clusters are used only when nothing else is left.
func firstNonEmpty(a, b []*endpointSlice) []*endpointSlice {
	if len(a) > 0 {
		return a
	}
	return b
}
