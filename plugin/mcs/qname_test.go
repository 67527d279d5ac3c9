package mcs

import (
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/miekg/dns"
)

func TestParseName(t *testing.T) {
	const native = "cluster.local."
	tests := []struct {
		name, zone string
		want       qname
	}{
		{"cluster.local.", native, qname{shape: shapeOther}},
		{"dns-version.cluster.local.", native, qname{shape: shapeOther, base: "dns-version"}},
		{"1-2-3-4.demo.pod.cluster.local.", native, qname{shape: shapeOther, base: "1-2-3-4.demo.pod"}},
		{"svc.cluster.local.", native, qname{shape: shapeSvc, base: "svc"}},
		{"demo.svc.cluster.local.", native, qname{shape: shapeNamespace, base: "demo.svc", namespace: "demo"}},
		{"serve.demo.svc.cluster.local.", native, qname{shape: shapeService, base: "serve.demo.svc", namespace: "demo", service: "serve"}},
		{"web-0.web.demo.svc.cluster.local.", native, qname{shape: shapeEndpoint, base: "web-0.web.demo.svc", namespace: "demo", service: "web", host: "web-0"}},
		// One label is an _proto in a native zone too: no hostname starts with "_".
		{"_tcp.web.demo.svc.cluster.local.", native, qname{shape: shapeProto, base: "_tcp.web.demo.svc", namespace: "demo", service: "web", proto: "tcp"}},
		{"_x.web.demo.svc.cluster.local.", native, qname{shape: shapeProto, base: "_x.web.demo.svc", namespace: "demo", service: "web", proto: "x"}},
		{"_http._tcp.serve.demo.svc.cluster.local.", native, qname{shape: shapePort, base: "_http._tcp.serve.demo.svc", namespace: "demo", service: "serve", port: "http", proto: "tcp"}},
		// Two labels are always a port in a native zone, as in the kubernetes plugin.
		{"http.tcp.serve.demo.svc.cluster.local.", native, qname{shape: shapePort, base: "http.tcp.serve.demo.svc", namespace: "demo", service: "serve", port: "http", proto: "tcp"}},
		{"a.b.c.serve.demo.svc.cluster.local.", native, qname{shape: shapeTooLong, base: "a.b.c.serve.demo.svc", namespace: "demo", service: "serve"}},
		{`a\.b.demo.svc.cluster.local.`, native, qname{shape: shapeOther, base: `a\.b.demo.svc`}},
		// The kubernetes plugin's zonal names; the zone may hold dots.
		{"us.east.pin._zone.db.demo.svc.cluster.local.", native, qname{shape: shapeZonal, base: "us.east.pin._zone.db.demo.svc", namespace: "demo", service: "db", topoZone: "us.east"}},
		{"zone-a.prefer._zone.db.demo.svc.cluster.local.", native, qname{shape: shapeZonal, base: "zone-a.prefer._zone.db.demo.svc", namespace: "demo", service: "db", topoZone: "zone-a", prefer: true}},
		{"zone-a.near._zone.db.demo.svc.cluster.local.", native, qname{shape: shapeTooLong, base: "zone-a.near._zone.db.demo.svc", namespace: "demo", service: "db"}},
		{"pin._zone.db.demo.svc.cluster.local.", native, qname{shape: shapePort, base: "pin._zone.db.demo.svc", namespace: "demo", service: "db", port: "pin", proto: "zone"}},
		{"zone-a.pin._zone.db.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapeTooLong, base: "zone-a.pin._zone.db.demo.svc", namespace: "demo", service: "db"}},

		{"serve.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapeService, base: "serve.demo.svc", namespace: "demo", service: "serve"}},
		{"member1.web.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapeCluster, base: "member1.web.demo.svc", namespace: "demo", service: "web", cluster: "member1"}},
		{"_tcp.web.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapeProto, base: "_tcp.web.demo.svc", namespace: "demo", service: "web", proto: "tcp"}},
		{"web-0.member1.web.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapeEndpoint, base: "web-0.member1.web.demo.svc", namespace: "demo", service: "web", host: "web-0", cluster: "member1"}},
		{"_http._tcp.web.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapePort, base: "_http._tcp.web.demo.svc", namespace: "demo", service: "web", port: "http", proto: "tcp"}},
		// One underscore makes two labels a port in the clusterset zone.
		{"web-0._tcp.web.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapePort, base: "web-0._tcp.web.demo.svc", namespace: "demo", service: "web", port: "web-0", proto: "tcp"}},
		{"_http.tcp.web.demo.svc.clusterset.local.", clustersetZone, qname{shape: shapePort, base: "_http.tcp.web.demo.svc", namespace: "demo", service: "web", port: "http", proto: "tcp"}},
	}
	for _, tc := range tests {
		if got := parseName(tc.name, tc.zone); got != tc.want {
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

// FuzzParseName: parsing never panics, and agrees with a plain split of
// the name into labels.
func FuzzParseName(f *testing.F) {
	for _, s := range []string{"serve.demo.svc", "_http._tcp.serve.demo.svc", "web-0.member1.web.demo.svc", "_tcp.web.demo.svc", "member1.web.demo.svc", "svc", "", "a.b.c.d.e.svc", "a.b.pin._zone.db.demo.svc", `a\.b.c.svc`, "x..svc", ".svc"} {
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
		if got, want := parseName(name, zone), splitName(name, zone); got != want {
			t.Fatalf("parseName(%q, %q) = %+v, a plain split says %+v", name, zone, got, want)
		}
	})
}

// splitName is parseName written plainly, allocations and all: the
// reference the fuzzer holds parseName to.
func splitName(name, zone string) qname {
	q := qname{base: strings.TrimSuffix(strings.TrimSuffix(name, zone), ".")}
	if q.base == "" || strings.Contains(q.base, `\`) {
		return q
	}
	labels := strings.Split(q.base, ".")
	slices.Reverse(labels) // svc, namespace, service, then leftwards
	if labels[0] != "svc" {
		return q
	}
	clusterset := zone == clustersetZone
	underscore := func(l string) bool { return strings.HasPrefix(l, "_") }
	trim := func(l string) string { return strings.TrimPrefix(l, "_") }
	switch len(labels) {
	case 1:
		q.shape = shapeSvc
	case 2:
		q.shape, q.namespace = shapeNamespace, labels[1]
	default:
		q.namespace, q.service = labels[1], labels[2]
	}
	switch {
	case len(labels) == 3:
		q.shape = shapeService
	case len(labels) == 4 && underscore(labels[3]):
		q.shape, q.proto = shapeProto, trim(labels[3])
	case len(labels) == 4 && !clusterset:
		q.shape, q.host = shapeEndpoint, labels[3]
	case len(labels) == 4:
		q.shape, q.cluster = shapeCluster, labels[3]
	case len(labels) == 5 && clusterset && !underscore(labels[3]) && !underscore(labels[4]):
		q.shape, q.host, q.cluster = shapeEndpoint, labels[4], labels[3]
	case len(labels) == 5:
		q.shape, q.port, q.proto = shapePort, trim(labels[4]), trim(labels[3])
	case len(labels) > 5 && !clusterset && labels[3] == "_zone" && (labels[4] == "pin" || labels[4] == "prefer"):
		// The kubernetes plugin's zonal names: the zone is every label left
		// of the directive.
		zone := slices.Clone(labels[5:])
		slices.Reverse(zone)
		q.shape, q.topoZone, q.prefer = shapeZonal, strings.Join(zone, "."), labels[4] == "prefer"
	case len(labels) > 5:
		q.shape = shapeTooLong
	}
	return q
}

// Which names can name an object: the shape decides which labels must be
// what Kubernetes allows.
func TestNamePossible(t *testing.T) {
	for name, want := range map[string]bool{
		"serve.demo.svc.cluster.local.":                 true,
		"9serve.demo.svc.cluster.local.":                true, // a relaxed Service name
		"web-0.web.demo.svc.cluster.local.":             true,
		"fd00--5.web.demo.svc.cluster.local.":           true, // a dashed IPv6 address
		"--1.web.demo.svc.cluster.local.":               true,
		"_http._tcp.serve.demo.svc.cluster.local.":      true,
		"http.sctp.serve.demo.svc.cluster.local.":       true,
		"www.example.com.demo.svc.cluster.local.":       false, // protocol example
		"_http._tcp.-serve.demo.svc.cluster.local.":     false,
		"_tcp.web.demo.svc.cluster.local.":              true,  // _<proto>, which names exist below
		"_x.web.demo.svc.cluster.local.":                false, // no such protocol
		"serve.de_mo.svc.cluster.local.":                false,
		"demo.svc.clusterset.local.":                    true,
		"de_mo.svc.clusterset.local.":                   false,
		"member1.web.demo.svc.clusterset.local.":        true,
		"member_1.web.demo.svc.clusterset.local.":       false,
		"_udp.web.demo.svc.clusterset.local.":           true,
		"_ftp.web.demo.svc.clusterset.local.":           false,
		"web-0.member1.web.demo.svc.clusterset.local.":  true,
		"web-0.member-.web.demo.svc.clusterset.local.":  false,
		"_http._example.web.demo.svc.clusterset.local.": false,
	} {
		zone := "cluster.local."
		if strings.HasSuffix(name, clustersetZone) {
			zone = clustersetZone
		}
		if got := parseName(name, zone).possible(); got != want {
			t.Errorf("%s: possible %v, want %v", name, got, want)
		}
	}
}
