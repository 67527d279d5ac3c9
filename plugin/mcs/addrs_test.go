package mcs

import (
	"slices"
	"strconv"
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
	if got := slices.Collect(a.slices(ip)); !slices.Equal(got, []*endpointSlice{s1, s2, s3}) {
		t.Fatalf("filed under %v: %v, want s1, s2, s3 once each", ip, got)
	}
	newer := &endpointSlice{objMeta: s1.objMeta} // another version of s1
	a.remove(ip, newer)
	if got := slices.Collect(a.slices(ip)); !slices.Equal(got, []*endpointSlice{s2, s3}) {
		t.Fatalf("after s1 went: %v, want s2, s3", got)
	}
	a.remove(ip, s3)
	a.remove(ip, s2)
	if got := slices.Collect(a.slices(ip)); a.len() != len(neighbours) || got != nil {
		t.Fatalf("after every slice went: %d entries, %v under %v", a.len(), got, ip)
	}
	for _, n := range neighbours {
		if got := slices.Collect(a.slices(parseIP(n))); !slices.Equal(got, []*endpointSlice{other}) {
			t.Errorf("%s: %v, want other alone", n, got)
		}
		a.remove(parseIP(n), other)
	}
	if len(a.v4) != 0 || len(a.v6) != 0 {
		t.Fatalf("groups left after every address went: %d IPv4, %d IPv6", len(a.v4), len(a.v6))
	}
}

// A group refers to at most maxGroupSlices slices: past that, a slice's
// addresses in the group are left out, and those filed before answer as
// they did.
func TestAddrIndexGroupBound(t *testing.T) {
	a := newAddrIndex()
	ip := parseIP("10.2.0.5")
	first := &endpointSlice{objMeta: newMeta("demo", "first", "")}
	a.add(ip, first)
	for i := 1; i < maxGroupSlices; i++ {
		a.add(parseIP("10.2.0.6"), &endpointSlice{objMeta: newMeta("demo", strconv.Itoa(i), "")})
	}
	past := &endpointSlice{objMeta: newMeta("demo", "past", "")}
	a.add(ip, past)
	if got := slices.Collect(a.slices(ip)); !slices.Equal(got, []*endpointSlice{first}) {
		t.Fatalf("filed under %v: %d slices, want the first alone", ip, len(got))
	}
	a.remove(ip, first)
	a.add(ip, past)
	if got := slices.Collect(a.slices(ip)); !slices.Equal(got, []*endpointSlice{past}) {
		t.Fatalf("once a slice went, filed under %v: %d slices, want the next one", ip, len(got))
	}
}
