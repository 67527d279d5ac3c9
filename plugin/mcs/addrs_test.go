package mcs

import (
	"slices"
	"testing"
)

// An address in several slices (an endpoint moving between them) answers
// from each until it is removed from each, whichever goes first; an
// address repeated within a slice is filed once; its neighbours in the
// same group, of either family, are their own.
func TestAddrIndexSharedAddress(t *testing.T) {
	a := newAddrIndex()
	ip := parseIP("10.2.0.5")
	s1 := &endpointSlice{objMeta: newMeta("demo", "s1", "")}
	s2 := &endpointSlice{objMeta: newMeta("demo", "s2", "")}
	s3 := &endpointSlice{objMeta: newMeta("demo", "s3", "")}
	other := &endpointSlice{objMeta: newMeta("demo", "other", "")}
	neighbours := []string{"10.2.0.6", "10.2.0.4", "10.2.1.5", "fd00::5", "fd00::4"}
	for _, n := range neighbours {
		a.add(parseIP(n), other)
	}
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
	if a.len() != len(neighbours) || a.slices(ip) != nil {
		t.Fatalf("after every slice went: %d entries, %v under %v", a.len(), a.slices(ip), ip)
	}
	for _, n := range neighbours {
		if got := a.slices(parseIP(n)); !slices.Equal(got, []*endpointSlice{other}) {
			t.Errorf("%s: %v, want other alone", n, got)
		}
		a.remove(parseIP(n), other)
	}
	if len(a.v4) != 0 || len(a.v6) != 0 {
		t.Fatalf("groups left after every address went: %d IPv4, %d IPv6", len(a.v4), len(a.v6))
	}
}
