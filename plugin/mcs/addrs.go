package mcs

import (
	"net"
	"slices"
)

// addrIndex files imported slices by the address of each ready endpoint,
// for PTR queries (reverse.go). It holds an entry per address, hundreds of
// thousands in a large clusterset, so an entry is the address in 4 bytes
// (16 for IPv6) and one pointer: an address is in one slice but for the
// moments an endpoint moves between slices, which more covers.
type addrIndex struct {
	v4 addrMap[[4]byte]
	v6 addrMap[[16]byte]
}

type addrMap[K comparable] struct {
	first map[K]*endpointSlice
	more  map[K][]*endpointSlice
}

func newAddrIndex() addrIndex {
	return addrIndex{v4: newAddrMap[[4]byte](), v6: newAddrMap[[16]byte]()}
}

func newAddrMap[K comparable]() addrMap[K] {
	return addrMap[K]{first: map[K]*endpointSlice{}, more: map[K][]*endpointSlice{}}
}

// add files s under ip. An address may repeat within a slice, whose
// endpoints are added one after another: s is filed once.
func (a addrIndex) add(ip net.IP, s *endpointSlice) {
	if v4 := ip.To4(); v4 != nil {
		a.v4.add([4]byte(v4), s)
	} else {
		a.v6.add([16]byte(ip), s)
	}
}

// remove takes every version of the slice s out from under ip.
func (a addrIndex) remove(ip net.IP, s *endpointSlice) {
	if v4 := ip.To4(); v4 != nil {
		a.v4.remove([4]byte(v4), s)
	} else {
		a.v6.remove([16]byte(ip), s)
	}
}

// slices are the slices filed under ip.
func (a addrIndex) slices(ip net.IP) []*endpointSlice {
	if v4 := ip.To4(); v4 != nil {
		return a.v4.slices([4]byte(v4))
	}
	if len(ip) != net.IPv6len {
		return nil
	}
	return a.v6.slices([16]byte(ip))
}

// len is the number of addresses filed.
func (a addrIndex) len() int { return len(a.v4.first) + len(a.v6.first) }

func (a addrMap[K]) add(k K, s *endpointSlice) {
	first, ok := a.first[k]
	switch {
	case !ok:
		a.first[k] = s
	case first != s && !slices.Contains(a.more[k], s):
		a.more[k] = append(a.more[k], s)
	}
}

func (a addrMap[K]) remove(k K, s *endpointSlice) {
	rest := slices.DeleteFunc(a.more[k], s.sameObject)
	if first, ok := a.first[k]; ok && first.sameObject(s) {
		if len(rest) == 0 {
			delete(a.first, k)
		} else {
			a.first[k], rest = rest[0], rest[1:]
		}
	}
	if len(rest) == 0 {
		delete(a.more, k)
	} else {
		a.more[k] = rest
	}
}

func (a addrMap[K]) slices(k K) []*endpointSlice {
	first, ok := a.first[k]
	if !ok {
		return nil
	}
	return append([]*endpointSlice{first}, a.more[k]...)
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
