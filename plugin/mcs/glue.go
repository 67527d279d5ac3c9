package mcs

import (
	"cmp"
	"maps"
	"net"
	"slices"
	"sync/atomic"
)

// glue is what nsGlue answers, kept current as the index changes: each
// service's share (the addresses it gives the server's own endpoints) and
// their union, published for queries to read without a lock.
type glue struct {
	addrs []net.IP                 // the server's addresses; under index.mu
	by    map[svcKey][]net.IP      // each service's share; under index.mu
	ips   atomic.Pointer[[]net.IP] // the union, in service order
}

// setGlueAddrs sets the server's own addresses, known once it listens,
// and works every service's share out again.
func (x *index) setGlueAddrs(addrs []net.IP) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.glue.addrs = addrs
	x.glue.by = map[svcKey][]net.IP{}
	for k, v := range x.views {
		if share := glueOf(v, addrs); len(share) > 0 {
			x.glue.by[k] = share
		}
	}
	x.publishGlue()
}

// refreshGlue updates k's share after a change of its view v (nil: gone).
// The caller holds x.mu.
func (x *index) refreshGlue(k svcKey, v *view) {
	var share []net.IP
	if v != nil {
		share = glueOf(v, x.glue.addrs)
	}
	if slices.EqualFunc(share, x.glue.by[k], net.IP.Equal) {
		return
	}
	if len(share) == 0 {
		delete(x.glue.by, k)
	} else {
		x.glue.by[k] = share
	}
	x.publishGlue()
}

// glueOf is v's share: for each of its own (not imported) endpoints at one
// of addrs, its Service's ClusterIPs, or the endpoint itself when the
// Service is headless or unknown.
func glueOf(v *view, addrs []net.IP) []net.IP {
	var out []net.IP
	add := func(ips ...net.IP) {
		for _, ip := range ips {
			if !slices.ContainsFunc(out, ip.Equal) {
				out = append(out, ip)
			}
		}
	}
	if len(addrs) == 0 {
		return nil
	}
	for _, s := range v.local() {
		for ep := range s.all() {
			ip := ep.ip
			switch {
			case !slices.ContainsFunc(addrs, ip.Equal):
			case v.svc != nil && !v.svc.headless && len(v.svc.ips) > 0:
				add(v.svc.ips...)
			default:
				add(ip)
			}
		}
	}
	return out
}

// publishGlue stores the union of the shares, in the order of their
// services, so that answers are stable.
func (x *index) publishGlue() {
	keys := slices.SortedFunc(maps.Keys(x.glue.by), func(a, b svcKey) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name))
	})
	var union []net.IP
	for _, k := range keys {
		for _, ip := range x.glue.by[k] {
			if !slices.ContainsFunc(union, ip.Equal) {
				union = append(union, ip)
			}
		}
	}
	x.glue.ips.Store(&union)
}
