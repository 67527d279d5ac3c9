package decide

import (
	"fmt"
	"strings"
	"testing"
)

// slice stands for an EndpointSlice: a cluster and a name.
type slice struct{ cluster, name string }

func clusterOf(s slice) string { return s.cluster }

// Preferred keeps the slices of one cluster in a long sorted list, whatever
// its place, and the unlisted ones in their order.
func TestPreferred(t *testing.T) {
	var ss []slice
	for i := range 9 {
		for j := range 2 {
			ss = append(ss, slice{fmt.Sprintf("c%d", i), fmt.Sprint(j)})
		}
	}
	names := func(ss []slice) string {
		var out []string
		for _, s := range ss {
			out = append(out, s.cluster+"/"+s.name)
		}
		return strings.Join(out, " ")
	}
	for order, want := range map[string]string{
		"c0":       "c0/0 c0/1",
		"c8":       "c8/0 c8/1",
		"x,c4,c0":  "c4/0 c4/1",
		"c1,c2,c3": "c1/0 c1/1",
	} {
		if got := names(Preferred(ss, strings.Split(order, ","), clusterOf)); got != want {
			t.Errorf("order %s: %s, want %s", order, got, want)
		}
	}
	if got := names(Preferred(ss[:6], []string{"x"}, clusterOf)); got != names(ss[:6]) {
		t.Errorf("no listed cluster present: %s", got)
	}
	if got := names(Preferred(ss[:4], []string{"c0"}, clusterOf)); got != "c0/0 c0/1" {
		t.Errorf("%s", got)
	}
	if got := names(Preferred(ss[:6], nil, clusterOf)); got != names(ss[:6]) {
		t.Errorf("no order: %s", got)
	}
}

// FirstListed picks the first listed cluster with a remote endpoint, the
// fresh before the stale, and none when only unlisted ones have any.
func TestFirstListed(t *testing.T) {
	fresh := []slice{{"c1", "a"}, {"c2", "a"}, {"c3", "a"}}
	stale := []slice{{"c4", "a"}, {"c5", "a"}}
	for _, tc := range []struct {
		name         string
		fresh, stale []slice
		order        string
		want         string
	}{
		{"the first listed fresh one", fresh, stale, "x,c3,c1", "c3"},
		{"a listed stale one after every fresh one", fresh, stale, "c5,c2", "c2"},
		{"only unlisted fresh ones: none, though a listed one is stale", fresh, stale, "c5", ""},
		{"no fresh one: the first listed stale one", nil, stale, "c1,c5,c4", "c5"},
		{"no order", fresh, stale, "", ""},
		{"no endpoint at all", nil, nil, "c1", ""},
	} {
		var order []string
		if tc.order != "" {
			order = strings.Split(tc.order, ",")
		}
		if got := FirstListed(tc.fresh, tc.stale, order, clusterOf); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
