package main

import (
	"testing"
)

func TestAddressPlan(t *testing.T) {
	w := &world{opts: options{endpoints: 3}}
	tests := []struct {
		i, v int
		want []string
	}{
		{0, 0, []string{"10.64.0.0", "10.129.0.0", "10.130.0.0"}},
		{999, 1, []string{"10.65.3.231", "10.129.3.231", "10.130.3.231"}},
		{maxServices - 1, versions - 1, []string{"10.127.255.255", "10.129.255.255", "10.130.255.255"}},
		{5, versions, []string{"10.64.0.5", "10.129.0.5", "10.130.0.5"}}, // versions wrap
	}
	for _, tt := range tests {
		got := w.addresses(tt.i, tt.v)
		if answerOf(got) != answerOf(tt.want) {
			t.Errorf("addresses(%d, %d) = %v, want %v", tt.i, tt.v, got, tt.want)
		}
		if v, ok := versionOf(got[0], tt.i); !ok || v != tt.v%versions {
			t.Errorf("versionOf(%s, %d) = %d, %t, want %d", got[0], tt.i, v, ok, tt.v%versions)
		}
	}
	// Every service's addresses differ from every other's and from its
	// next version's: a change always changes the answer.
	seen := map[string]bool{}
	for i := range 1000 {
		for _, v := range []int{0, 1} {
			for _, a := range w.addresses(i, v) {
				if a[:6] != "10.129" && a[:6] != "10.130" && seen[a] {
					t.Fatalf("address %s given twice", a)
				}
				seen[a] = true
			}
		}
	}
}

func TestVersionOfRefuses(t *testing.T) {
	for _, tt := range []struct {
		addr string
		i    int
	}{
		{"10.129.0.1", 1}, // a fixed endpoint
		{"10.64.0.1", 2},  // another service's
		{"10.128.0.1", 1}, // past the versions
		{"192.168.0.1", 1},
		{"fd00::1", 1},
		{"garbage", 1},
	} {
		if v, ok := versionOf(tt.addr, tt.i); ok {
			t.Errorf("versionOf(%s, %d) = %d, want refused", tt.addr, tt.i, v)
		}
	}
}

func TestAnswerOf(t *testing.T) {
	in := []string{"10.2.0.1", "10.1.0.1"}
	if got := answerOf(in); got != "10.1.0.1,10.2.0.1" {
		t.Errorf("answerOf = %q", got)
	}
	if in[0] != "10.2.0.1" {
		t.Error("answerOf sorted its argument")
	}
	if answerOf(nil) != "" {
		t.Error("answerOf(nil) is not empty")
	}
}
