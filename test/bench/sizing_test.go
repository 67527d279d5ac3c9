package main

import "testing"

func TestParseGoMemLimit(t *testing.T) {
	for in, want := range map[string]int64{"1024": 1024, "512B": 512, "3KiB": 3 << 10, "460MiB": 460 << 20, "2GiB": 2 << 30, "1TiB": 1 << 40} {
		if got, err := parseGoMemLimit(in); err != nil || got != want {
			t.Errorf("parseGoMemLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1MB", "1.5GiB", "MiB"} {
		if _, err := parseGoMemLimit(in); err == nil {
			t.Errorf("parseGoMemLimit(%q) took it", in)
		}
	}
}

// What make bench prints as shipped is deploy/member's, and meets the rule
// for the figures it was sized from.
func TestReadShipped(t *testing.T) {
	s, err := readShipped("../..")
	if err != nil {
		t.Fatal(err)
	}
	if s.request <= 0 || s.limit <= s.request || s.goMemLimit <= 0 {
		t.Fatalf("deploy/member's CoreDNS: request %d, limit %d, GOMEMLIMIT %d; want all set, the limit above the request", s.request, s.limit, s.goMemLimit)
	}
	fits := memoryReading{rss: s.request, hwm: int64(float64(s.limit) / limitPerPeak)}
	for _, c := range s.checks(fits) {
		if !c.met() {
			t.Errorf("%s: have %d, want %d", c.what, c.have, c.want)
		}
	}
	if c := s.checks(memoryReading{rss: s.request + 1, hwm: s.limit})[:2]; c[0].met() || c[1].met() {
		t.Errorf("a process past the request and half the limit passes: %+v", c)
	}
}
