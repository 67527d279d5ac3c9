package mcs

import (
	"net"
	"slices"
)

// addrIndex files imported slices by the address of each ready endpoint,
// for PTR queries (reverse.go). It holds an entry per address, hundreds of
// thousands in a large clusterset, so an entry is a fixed-size key and one
// pointer: an address is in one slice but for the moments an endpoint
// moves between slices, which the few entries of more cover.
type addrIndex struct {
	first map[[16]byte]*endpointSlice
	more  map[[16]byte][]*endpointSlice
}

func newAddrIndex() addrIndex {
	return addrIndex{first: map[[16]byte]*endpointSlice{}, more: map[[16]byte][]*endpointSlice{}}
}

// add files s under k. An address may repeat within a slice, whose
// endpoints are added one after another: s is filed once.
func (a addrIndex) add(k [16]byte, s *endpointSlice) {
	first, ok := a.first[k]
	switch {
	case !ok:
		a.first[k] = s
	case first != s && !slices.Contains(a.more[k], s):
		a.more[k] = append(a.more[k], s)
	}
}

// remove takes every version of the slice s out from under k.
func (a addrIndex) remove(k [16]byte, s *endpointSlice) {
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

// len is the number of addresses filed.
func (a addrIndex) len() int { return len(a.first) }

// slices are the slices filed under ip.
func (a addrIndex) slices(ip net.IP) []*endpointSlice {
	k := addrKey(ip)
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
			x.addrs.remove(addrKey(e.ip), old)
		}
	}
	if curRemote {
		for e := range cur.all() {
			x.addrs.add(addrKey(e.ip), cur)
		}
	}
}

// filedByAddress reports whether s goes into the address index: a slice
// imported from another cluster, when PTR queries are answered.
func (x *index) filedByAddress(s *endpointSlice) bool {
	return x.byAddress && s != nil && s.imported && s.service != "" && s.cluster != x.self
}
