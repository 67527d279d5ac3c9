package mcs

import (
	"cmp"
	"iter"
	"slices"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/plugin/mcs/decide"
)

// view is the immutable snapshot of one service that queries read.
type view struct {
	svc      *service       // nil: no Service of that name in this cluster
	imp      *serviceImport // nil: not imported
	strategy api.Strategy   // "": native names are not multi-cluster for this service

	// slices are the service's slices with a ready endpoint: this
	// cluster's own (L) by name, then every imported one, this cluster's
	// included (clusterset answers), by cluster and name. union is L ∪ R,
	// R the imported slices of other clusters: slices itself unless this
	// cluster's own are imported too. A fleet has tens of thousands of
	// views, so the lists are windows on these two arrays.
	slices []*endpointSlice
	union  []*endpointSlice
	nLocal int32
	// remapped: a ready endpoint listens on another number than the
	// service's port it stands for, and no pod address answers the
	// service (decide.Rules.Remapped).
	remapped bool
}

func (v *view) local() []*endpointSlice    { return v.slices[:v.nLocal:v.nLocal] }
func (v *view) imported() []*endpointSlice { return v.slices[v.nLocal:] }
func (v *view) remote() []*endpointSlice   { return v.union[v.nLocal:] }

func newView(e entry, self string, fallback api.Strategy) *view {
	// A copy of the entry's slices: of their exact size, where the edited
	// array may have room to spare, and clipped, so that no reader can
	// append to it in place.
	v := &view{svc: e.svc, imp: e.imp, slices: slices.Clip(slices.Clone(e.slices))}
	if e.imp != nil {
		v.strategy = cmp.Or(e.imp.strategy, fallback)
	}
	slices.SortFunc(v.slices, byOrigin)
	nLocal := slices.IndexFunc(v.slices, (*endpointSlice).isImported)
	if nLocal < 0 {
		nLocal = len(v.slices)
	}
	v.nLocal = int32(nLocal) // #nosec G115 -- a service's slices, far fewer than 2^31
	v.remapped = v.endpointPortsRemapped()
	v.union = v.slices
	fromSelf := func(s *endpointSlice) bool { return s.imported && s.cluster == self }
	if slices.ContainsFunc(v.imported(), fromSelf) {
		v.union = slices.Clip(slices.DeleteFunc(slices.Clone(v.slices), fromSelf))
	}
	return v
}

// endpointPortsRemapped reports whether a ready endpoint of a ClusterIP
// import listens on another number than the port it stands for: this
// cluster's own against its Service's ports (the import's without one),
// imported ones against the import's.
func (v *view) endpointPortsRemapped() bool {
	if v.imp == nil || v.imp.headless {
		return false
	}
	imported := decidePorts(v.imp.ports)
	local := imported
	if v.svc != nil {
		local = decidePorts(v.svc.ports)
	}
	for i, s := range v.slices {
		want := imported
		if i < int(v.nLocal) {
			want = local
		}
		for p := range s.ports.all() {
			if decide.Remapped(want, decide.Port{Name: p.name, Protocol: p.protocol, Number: p.port}) {
				return true
			}
		}
	}
	return false
}

func decidePorts(l portList) []decide.Port {
	var out []decide.Port
	for p := range l.all() {
		out = append(out, decide.Port{Name: p.name, Protocol: p.protocol, Number: p.port})
	}
	return out
}

// entry is the objects v was built from, for a change to edit.
func (v *view) entry() entry {
	if v == nil {
		return entry{}
	}
	return entry{svc: v.svc, imp: v.imp, slices: slices.Clone(v.slices)}
}

// byOrigin orders a view's slices: local ones by name, then imported ones
// by cluster and name.
func byOrigin(a, b *endpointSlice) int {
	if a.imported != b.imported {
		if a.imported {
			return 1
		}
		return -1
	}
	return byClusterThenName(a, b)
}

func (s *endpointSlice) isImported() bool { return s.imported }

func byClusterThenName(a, b *endpointSlice) int {
	return cmp.Or(cmp.Compare(a.cluster, b.cluster), cmp.Compare(a.name(), b.name()))
}

// native reports whether this service's cluster.local names are answered by mcs.
func (v *view) native() bool { return v != nil && v.strategy != "" }

func (v *view) hasLocalVIP() bool { return v.svc != nil && len(v.svc.ips) > 0 }

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
	for _, s := range v.imported() {
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
		return hasNamedProtocol(v.imp.ports.all(), proto)
	}
	for _, s := range v.imported() {
		if hasNamedProtocol(s.ports.all(), proto) {
			return true
		}
	}
	return false
}

// hasNamedProtocol: only named ports have SRV names (KEP-1645 §2.3.2).
func hasNamedProtocol(ports iter.Seq[port], proto string) bool {
	for p := range ports {
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
	if host == "" && !v.anyStale(x, v.remote(), now) {
		return candidates{local: v.local(), fresh: v.remote(), union: v.union}
	}
	var c candidates
	c.local = withHost(v.local(), host)
	for _, sl := range withHost(v.remote(), host) {
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
	if !v.anyStale(x, v.imported(), now) {
		return v.imported(), nil
	}
	for _, sl := range v.imported() {
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
