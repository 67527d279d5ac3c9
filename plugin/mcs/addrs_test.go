package mcs

import (
	"slices"
	"testing"
)

// An address in several slices (an endpoint moving between them) answers
// from each until it is removed from each, whichever goes first; an
// address repeated within a slice is filed once.
func TestAddrIndexSharedAddress(t *testing.T) {
	a := newAddrIndex()
	ip := parseIP("10.2.0.5")
	s1 := &endpointSlice{objMeta: objMeta{namespace: "demo", name: "s1"}}
	s2 := &endpointSlice{objMeta: objMeta{namespace: "demo", name: "s2"}}
	s3 := &endpointSlice{objMeta: objMeta{namespace: "demo", name: "s3"}}
	for _, s := range []*endpointSlice{s1, s1, s2, s2, s3} {
		a.add(ip, s)
	}
	if got := a.slices(ip); !slices.Equal(got, []*endpointSlice{s1, s2, s3}) {
		t.Fatalf("filed under %v: %v, want s1, s2, s3 once each", ip, got)
	}
	newer := &endpointSlice{objMeta: s1.objMeta} // another version of s1
	a.remove(ip, newer)
	if got := a.slices(ip); !slices.Equal(got, []*endpointSlice{s2, s3}) {
		t.Fatalf("after s1 went: %v, want s2, s3", got)
	}
	a.remove(ip, s3)
	a.remove(ip, s2)
	if a.len() != 0 || len(a.v4.more) != 0 || a.slices(ip) != nil {
		t.Fatalf("after every slice went: %d addresses, %d shared, %v", a.len(), len(a.v4.more), a.slices(ip))
	}
}
