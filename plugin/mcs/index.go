package mcs

import (
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
)

type svcKey struct{ namespace, name string }

// entry is a service's objects as a change edits them, before newView
// files them. Only writers (informer handlers, under index.mu) hold one.
type entry struct {
	svc    *service
	imp    *serviceImport
	slices []*endpointSlice // those with a ready endpoint, in any order
}

// putSlice files s, replacing the version of the same name; a slice
// without a ready endpoint is left out, as answers leave it out.
func (e *entry) putSlice(s *endpointSlice) {
	e.dropSlice(s.name())
	if s.count() > 0 {
		e.slices = append(e.slices, s)
	}
}

// dropSlice removes the slice named name.
func (e *entry) dropSlice(name string) {
	e.slices = slices.DeleteFunc(e.slices, func(s *endpointSlice) bool { return s.name() == name })
}

// index is the in-memory state answers are read from. A query costs one map
// lookup under a read lock: every change rebuilds that service's immutable
// view, so readers never see one half-updated. Every service with a
// Service, a ServiceImport or a ready endpoint has a view; only imported
// ones answer.
type index struct {
	mu         sync.RWMutex
	views      map[svcKey]*view
	namespaces map[string]struct{}
	// addrs files the imported slices of other clusters by the address of
	// each ready endpoint, for PTR queries (see reverse.go), when mcs has a
	// reverse zone: only those, as the addresses of this cluster's own
	// endpoints, most of a cluster's, are the kubernetes plugin's to answer.
	addrs     addrIndex
	byAddress bool

	// leases maps a source cluster to its Lease's expiry. It changes every few
	// seconds per cluster and is read on every query, so it is a copied map
	// swapped atomically rather than another thing under mu.
	leases atomic.Pointer[map[string]time.Time]

	self     string       // this cluster's name, set before informers start
	strategy api.Strategy // the strategy option: applies to imports without the annotation
	serial   atomic.Uint32
	glue     glue // what ns.dns answers (glue.go)
}

func newIndex(s api.Strategy, byAddress bool) *index {
	x := &index{
		views:      map[svcKey]*view{},
		namespaces: map[string]struct{}{},
		addrs:      newAddrIndex(),
		byAddress:  byAddress,
		strategy:   s,
	}
	x.leases.Store(&map[string]time.Time{})
	x.glue.ips.Store(&[]net.IP{})
	x.touch()
	return x
}

// touch moves the SOA serial on: negative answers cached downstream are
// tied to it.
func (x *index) touch() { x.serial.Store(uint32(time.Now().Unix())) } // #nosec G115 -- Unix time as SOA serial, like the kubernetes plugin

// view is the view of an imported service; nil for any other.
func (x *index) view(namespace, name string) *view {
	x.mu.RLock()
	v := x.importedView(svcKey{namespace, name})
	x.mu.RUnlock()
	return v
}

// importedView is view for a caller that holds x.mu.
func (x *index) importedView(k svcKey) *view {
	if v := x.views[k]; v != nil && v.imp != nil {
		return v
	}
	return nil
}

// hasService reports whether a Service namespace/name that is not the
// controller's exists: mcs reads every Service but the ones the controller
// writes (informers.go).
func (x *index) hasService(namespace, name string) bool {
	x.mu.RLock()
	v := x.views[svcKey{namespace, name}]
	x.mu.RUnlock()
	return v != nil && v.svc != nil
}

func (x *index) hasNamespace(name string) bool {
	x.mu.RLock()
	_, ok := x.namespaces[name]
	x.mu.RUnlock()
	return ok
}

// change applies fn to the objects of k and republishes its view. A view
// is rebuilt whole, a few slices at most for most services, which costs
// less than the informer's decoding of the object that changed.
func (x *index) change(k svcKey, fn func(*entry)) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.views[k].entry()
	fn(&e)
	var v *view
	if e.svc != nil || e.imp != nil || len(e.slices) > 0 {
		v = newView(e, x.self, x.strategy)
		x.views[k] = v
	} else {
		delete(x.views, k)
	}
	x.refreshGlue(k, v)
	x.touch()
}

func (x *index) setService(old, cur *service) {
	if cur == nil {
		x.change(svcKey{old.namespace(), old.name()}, func(e *entry) { e.svc = nil })
		return
	}
	x.change(svcKey{cur.namespace(), cur.name()}, func(e *entry) { e.svc = cur })
}

func (x *index) setImport(old, cur *serviceImport) {
	if cur == nil {
		x.change(svcKey{old.namespace(), old.name()}, func(e *entry) { e.imp = nil })
		return
	}
	x.change(svcKey{cur.namespace(), cur.name()}, func(e *entry) { e.imp = cur })
}

// setSlice files a slice under its service; a slice whose service label
// changed moves from the old service to the new one.
func (x *index) setSlice(old, cur *endpointSlice) {
	if old != nil && old.service != "" && (cur == nil || cur.service != old.service) {
		x.change(svcKey{old.namespace(), old.service}, func(e *entry) { e.dropSlice(old.name()) })
	}
	if cur != nil && cur.service != "" {
		x.change(svcKey{cur.namespace(), cur.service}, func(e *entry) { e.putSlice(cur) })
	}
	x.fileAddrs(old, cur)
}

func (x *index) setNamespace(old, cur *namespace) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cur == nil {
		delete(x.namespaces, old.name())
	} else {
		x.namespaces[cur.name()] = struct{}{}
	}
	x.touch()
}

func (x *index) setLease(old, cur *lease) {
	next := maps.Clone(*x.leases.Load())
	if old != nil {
		delete(next, old.cluster)
	}
	if cur != nil && cur.cluster != "" && !cur.expiry.IsZero() {
		next[cur.cluster] = cur.expiry
	}
	x.leases.Store(&next)
}

// stale reports whether cluster's Lease has expired at now. A cluster without
// a Lease (or with one that has no renew time) is not stale: nothing says so.
func (x *index) stale(cluster string, now time.Time) bool {
	exp, ok := (*x.leases.Load())[cluster]
	return ok && now.After(exp)
}

// staleAt lists the clusters whose Lease has expired at now.
func (x *index) staleAt(now time.Time) []string {
	var out []string
	for cluster, exp := range *x.leases.Load() {
		if now.After(exp) {
			out = append(out, cluster)
		}
	}
	return out
}
