package mcs

import (
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		name string
		want qname
	}{
		{"cluster.local.", qname{shape: shapeOther}},
		{"dns-version.cluster.local.", qname{shape: shapeOther, base: "dns-version"}},
		{"1-2-3-4.demo.pod.cluster.local.", qname{shape: shapeOther, base: "1-2-3-4.demo.pod"}},
		{"svc.cluster.local.", qname{shape: shapeSvc, base: "svc"}},
		{"demo.svc.cluster.local.", qname{shape: shapeNamespace, base: "demo.svc", namespace: "demo"}},
		{"serve.demo.svc.cluster.local.", qname{shape: shapeService, base: "serve.demo.svc", namespace: "demo", service: "serve"}},
		{"web-0.web.demo.svc.cluster.local.", qname{shape: shapeOneLabel, base: "web-0.web.demo.svc", namespace: "demo", service: "web", first: "web-0"}},
		{"_http._tcp.serve.demo.svc.cluster.local.", qname{shape: shapeTwoLabels, base: "_http._tcp.serve.demo.svc", namespace: "demo", service: "serve", first: "_http", second: "_tcp"}},
		{"a.b.c.serve.demo.svc.cluster.local.", qname{shape: shapeTooLong, base: "a.b.c.serve.demo.svc", namespace: "demo", service: "serve", first: "b", second: "c"}},
		{`a\.b.demo.svc.cluster.local.`, qname{shape: shapeOther, base: `a\.b.demo.svc`}},
	}
	for _, tc := range tests {
		if got := parseName(tc.name, "cluster.local."); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestMatchZone(t *testing.T) {
	m := &MCS{cfg: &config{zones: []string{"cluster.local.", clustersetZone, "svc.example."}}}
	tests := map[string]string{
		"serve.demo.svc.cluster.local.":    "cluster.local.",
		"cluster.local.":                   "cluster.local.",
		"xcluster.local.":                  "",
		"serve.demo.svc.clusterset.local.": clustersetZone,
		`a\.cluster.local.`:                "",
		`a\\.cluster.local.`:               "cluster.local.",
		"a.svc.example.":                   "svc.example.",
		"example.":                         "",
	}
	for name, want := range tests {
		if got := m.matchZone(name); got != want {
			t.Errorf("matchZone(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestPortQuery(t *testing.T) {
	tests := []struct {
		name       string
		clusterset bool
		want       bool
	}{
		{"_http._tcp", true, true},
		{"http.tcp", false, true},
		{"web-0.member1", true, false},
		{"web-0._tcp", true, true},
	}
	for _, tc := range tests {
		q := parseName(tc.name+".svc1.demo.svc.z.", "z.")
		if got := q.portQuery(tc.clusterset); got != tc.want {
			t.Errorf("%s clusterset=%v: got %v", tc.name, tc.clusterset, got)
		}
	}
}

// FuzzParseName: parsing never panics, and the labels it finds put back
// together give the name again.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"serve.demo.svc", "_http._tcp.serve.demo.svc", "web-0.member1.web.demo.svc", "svc", "", "a.b.c.d.e.svc", `a\.b.c.svc`, "x..svc", ".svc"} {
		f.Add(s, "cluster.local.")
		f.Add(s, "clusterset.local.")
	}
	f.Fuzz(func(t *testing.T, base, zone string) {
		zone = dns.Fqdn(strings.ToLower(zone))
		name := strings.ToLower(base) + "." + zone
		if base == "" {
			name = zone
		}
		if _, ok := dns.IsDomainName(name); !ok || !dns.IsSubDomain(zone, name) {
			return
		}
		m := &MCS{cfg: &config{zones: []string{"cluster.local.", clustersetZone, zone}}}
		if got, want := m.matchZone(name), plugin.Zones(m.cfg.zones).Matches(name); got != want {
			t.Fatalf("matchZone(%q) = %q, plugin.Zones.Matches says %q", name, got, want)
		}
		q := parseName(name, zone)
		if q.shape < shapeNamespace || q.shape == shapeTooLong {
			return
		}
		if got := joinBack(q) + "." + zone; got != name {
			t.Fatalf("parseName(%q, %q) = %+v, joins back to %q", name, zone, q, got)
		}
	})
}

// joinBack puts the labels parseName found back in their order.
func joinBack(q qname) string {
	labels := []string{q.namespace, "svc"}
	if q.shape >= shapeService {
		labels = append([]string{q.service}, labels...)
	}
	if q.shape == shapeTwoLabels {
		labels = append([]string{q.second}, labels...)
	}
	if q.shape >= shapeOneLabel {
		labels = append([]string{q.first}, labels...)
	}
	return strings.Join(labels, ".")
}
