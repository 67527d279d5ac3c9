package mcs

import (
	"net"
	"slices"
)

// addrIndex files imported slices by the address of each ready endpoint,
// for PTR queries (reverse.go). A large clusterset has hundreds of
// thousands of addresses, in blocks (a node's pod range is a /24 or
// larger), so the index groups them by all but their last byte: a group
// holds its addresses' last bytes sorted and the slice of each, 9 bytes an
// address where a map entry each took about 30. An address is in one slice
// but for the moments an endpoint moves between two, when it has an entry
// per slice.
type addrIndex struct {
	v4 addrGroups[[3]byte]
	v6 addrGroups[[15]byte]
}

type addrGroups[P comparable] map[P]*addrGroup

type addrGroup struct {
	last   []byte // sorted
	slices []*endpointSlice
}

func newAddrIndex() addrIndex {
	return addrIndex{v4: addrGroups[[3]byte]{}, v6: addrGroups[[15]byte]{}}
}

// add files s under ip. An address may repeat within a slice: s is filed
// once.
func (a addrIndex) add(ip net.IP, s *endpointSlice) {
	if v4 := ip.To4(); v4 != nil {
		a.v4.add([3]byte(v4), v4[3], s)
	} else {
		a.v6.add([15]byte(ip), ip[15], s)
	}
}

// remove takes every version of the slice s out from under ip.
func (a addrIndex) remove(ip net.IP, s *endpointSlice) {
	if v4 := ip.To4(); v4 != nil {
		a.v4.remove([3]byte(v4), v4[3], s)
	} else {
		a.v6.remove([15]byte(ip), ip[15], s)
	}
}

// slices are the slices filed under ip; the caller holds the index's lock
// while it reads them.
func (a addrIndex) slices(ip net.IP) []*endpointSlice {
	if v4 := ip.To4(); v4 != nil {
		return a.v4.slices([3]byte(v4), v4[3])
	}
	if len(ip) != net.IPv6len {
		return nil
	}
	return a.v6.slices([15]byte(ip), ip[15])
}

// len is the number of entries.
func (a addrIndex) len() int { return a.v4.len() + a.v6.len() }

func (a addrGroups[P]) add(p P, last byte, s *endpointSlice) {
	g := a[p]
	if g == nil {
		g = &addrGroup{}
		a[p] = g
	}
	lo, hi := g.span(last)
	if !slices.Contains(g.slices[lo:hi], s) {
		g.last = slices.Insert(g.last, hi, last)
		g.slices = slices.Insert(g.slices, hi, s)
	}
}

func (a addrGroups[P]) remove(p P, last byte, s *endpointSlice) {
	g := a[p]
	if g == nil {
		return
	}
	lo, hi := g.span(last)
	for i := hi - 1; i >= lo; i-- {
		if g.slices[i].sameObject(s) {
			g.last = slices.Delete(g.last, i, i+1)
			g.slices = slices.Delete(g.slices, i, i+1)
		}
	}
	if len(g.last) == 0 {
		delete(a, p)
	}
}

func (a addrGroups[P]) slices(p P, last byte) []*endpointSlice {
	g := a[p]
	if g == nil {
		return nil
	}
	if lo, hi := g.span(last); lo < hi {
		return g.slices[lo:hi:hi]
	}
	return nil
}

func (a addrGroups[P]) len() int {
	n := 0
	for _, g := range a {
		n += len(g.last)
	}
	return n
}

// span is where the entries of last byte b are.
func (g *addrGroup) span(b byte) (lo, hi int) {
	lo, _ = slices.BinarySearch(g.last, b)
	hi = lo
	for hi < len(g.last) && g.last[hi] == b {
		hi++
	}
	return lo, hi
}

// fileAddrs moves a slice's addresses in the address index from old to cur.
func (x *index) fileAddrs(old, cur *endpointSlice) {
	oldRemote, curRemote := x.filedByAddress(old), x.filedByAddress(cur)
	if !oldRemote && !curRemote {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if oldRemote {
		for e := range old.all() {
			x.addrs.remove(e.ip, old)
		}
	}
	if curRemote {
		for e := range cur.all() {
			x.addrs.add(e.ip, cur)
		}
	}
}

// filedByAddress reports whether s goes into the address index: a slice
// imported from another cluster, when PTR queries are answered.
func (x *index) filedByAddress(s *endpointSlice) bool {
	return x.byAddress && s != nil && s.imported && s.service != "" && s.cluster != x.self
}
