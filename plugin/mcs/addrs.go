package mcs

import (
	"iter"
	"net"
	"slices"
)

// addrIndex files imported slices by the address of each ready endpoint,
// for PTR queries (reverse.go). A large clusterset has hundreds of
// thousands of addresses, in blocks (a node's pod range is a /24 or
// larger), so the index groups them by all but their last byte: a group
// holds the slices its addresses are in, once each, and per address its
// last byte and which of those slices, 3 bytes an address where a map
// entry each took about 30. An address is in one slice but for the
// moments an endpoint moves between two, or when Services share a pod,
// when it has an entry per slice.
type addrIndex struct {
	v4 addrGroups[[3]byte]
	v6 addrGroups[[15]byte]
}

type addrGroups[P comparable] map[P]*addrGroup

type addrGroup struct {
	last   []byte   // sorted
	which  []uint16 // per address, its slice in slices
	slices []*endpointSlice
}

// maxGroupSlices bounds the slices a group refers to, and so the work of
// filing an address, which looks its slice up among them. A group holds 256
// addresses; 16 slices for each (a pod behind 16 Services, imported from
// each) is more than a cluster has, so only a member listing the same
// addresses over and over gets there, and the addresses of the slices left
// out have no PTR name.
const maxGroupSlices = 16 * 256

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
func (a addrIndex) slices(ip net.IP) iter.Seq[*endpointSlice] {
	if v4 := ip.To4(); v4 != nil {
		return a.v4.slices([3]byte(v4), v4[3])
	}
	if len(ip) != net.IPv6len {
		return func(func(*endpointSlice) bool) {}
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
	if slices.ContainsFunc(g.which[lo:hi], func(k uint16) bool { return g.slices[k] == s }) {
		return
	}
	k := slices.Index(g.slices, s)
	if k < 0 {
		if len(g.slices) == maxGroupSlices {
			return
		}
		k = len(g.slices)
		g.slices = append(g.slices, s)
	}
	g.last = slices.Insert(g.last, hi, last)
	g.which = slices.Insert(g.which, hi, uint16(k)) // #nosec G115 -- below maxGroupSlices
}

func (a addrGroups[P]) remove(p P, last byte, s *endpointSlice) {
	g := a[p]
	if g == nil {
		return
	}
	lo, hi := g.span(last)
	for i := hi - 1; i >= lo; i-- {
		if k := g.which[i]; g.slices[k].sameObject(s) {
			g.last = slices.Delete(g.last, i, i+1)
			g.which = slices.Delete(g.which, i, i+1)
			g.forget(k)
		}
	}
	if len(g.last) == 0 {
		delete(a, p)
	}
}

// forget drops slice k once no address refers to it.
func (g *addrGroup) forget(k uint16) {
	if slices.Contains(g.which, k) {
		return
	}
	g.slices = slices.Delete(g.slices, int(k), int(k)+1)
	for i, w := range g.which {
		if w > k {
			g.which[i] = w - 1
		}
	}
}

func (a addrGroups[P]) slices(p P, last byte) iter.Seq[*endpointSlice] {
	return func(yield func(*endpointSlice) bool) {
		g := a[p]
		if g == nil {
			return
		}
		lo, hi := g.span(last)
		for _, k := range g.which[lo:hi] {
			if !yield(g.slices[k]) {
				return
			}
		}
	}
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
	oldFiled, curFiled := x.filedByAddress(old), x.filedByAddress(cur)
	if !oldFiled && !curFiled {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if oldFiled {
		for e := range old.all() {
			x.addrs.remove(e.ip, old)
		}
	}
	if curFiled {
		for e := range cur.all() {
			x.addrs.add(e.ip, cur)
		}
	}
}

// filedByAddress reports whether s goes into the address index: an
// imported slice, when PTR queries are answered. Those of other clusters
// have clusterset names; every one, this cluster's own too, has a name
// under its derived-<svc> Service.
func (x *index) filedByAddress(s *endpointSlice) bool {
	return x.byAddress && s != nil && s.imported && s.service != ""
}
