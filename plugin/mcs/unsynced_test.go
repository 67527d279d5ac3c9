package mcs

import (
	"testing"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// neverSynced is an mcs whose API server never answers, as with a missing
// RBAC or an unreachable API: start-up gives up after its timeout and the
// informers never sync. Its next plugin is a kubernetes plugin that holds
// svcs.
func neverSynced(t *testing.T, cfg *config, svcs ...*corev1.Service) (*MCS, *kubernetes.Kubernetes) {
	t.Helper()
	cl, err := newClients(&rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := newMCS(cfg, cl)
	k := kubernetes.New([]string{testZone})
	k.APIConn = newSliceAPI(svcs, nil)
	m.Next, m.kube = k, kubePeerOf([]plugin.Handler{k})
	m.watcher.startupTimeout = 200 * time.Millisecond
	if err := m.watcher.start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = m.watcher.stop() })
	if m.Ready() {
		t.Fatal("ready without an API server")
	}
	return m, k
}

// Before mcs has synced, a name that cannot be an import's gets the
// kubernetes plugin's answer, byte for byte: the search-path expansions of
// external names, shaped like service, endpoint and port names, keep their
// NXDOMAIN, so that musl goes on to the next search domain. A name of an
// import (whose derived-<svc> Service the kubernetes plugin holds) still
// gets SERVFAIL, and so does a derived name mcs stands in for.
func TestUnsyncedOnlyImportsWait(t *testing.T) {
	derived := serviceObj("demo", api.DerivedPrefix+"serve", []string{vipSet}, httpPort)
	m, k := neverSynced(t, baseConfig(), derived, serviceObj("demo", "web", []string{vipLocal}, httpPort))
	for _, name := range []string{
		"www.example.com.demo.svc.cluster.local.", // "port" www, "protocol" example
		"www.example.com.svc.cluster.local.",      // endpoint www of service example in namespace com
		"example.com.demo.svc.cluster.local.",     // endpoint example of service com
		"example.com.svc.cluster.local.",          // service example in namespace com
		"www.example.com.cluster.local.",
		"x.web.demo.svc.cluster.local.", // a local Service's endpoint the kubernetes plugin denies
		"_http._tcp.nothere.demo.svc.cluster.local.",
		"bad_label.demo.svc.cluster.local.",
	} {
		for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
			got, want := serve(t, m, name, qtype), serve(t, k, name, qtype)
			if got.Rcode != dns.RcodeNameError || normalized(got) != normalized(want) {
				t.Errorf("%s %s: want the kubernetes plugin's NXDOMAIN\n%s\ngot\n%s", name, dns.TypeToString[qtype], want, got)
			}
		}
	}
	if got := serve(t, m, "web.demo.svc.cluster.local.", dns.TypeA); len(got.Answer) != 1 {
		t.Errorf("a local Service: want the kubernetes plugin's answer, got\n%s", got)
	}
	for _, name := range []string{
		"serve.demo.svc.cluster.local.",
		"x.serve.demo.svc.cluster.local.",
		"_http._tcp.serve.demo.svc.cluster.local.",
		"http.tcp.serve.demo.svc.cluster.local.", // the kubernetes plugin takes ports without "_" too
		"x.derived-serve.demo.svc.cluster.local.",
	} {
		if got := serve(t, m, name, dns.TypeA); got.Rcode != dns.RcodeServerFailure {
			t.Errorf("%s: an import's name, want SERVFAIL before sync, got\n%s", name, got)
		}
	}
}

// Without a kubernetes plugin to ask, any service may be an import: only the
// shape of the name tells, and an expansion that no object can have goes
// on.
func TestUnsyncedShapeWithoutKubernetes(t *testing.T) {
	f := newUnstartedFixture(t, baseConfig())
	f.m.Next = test.HandlerFunc(kubernetesLike)
	for name, want := range map[string]int{
		"www.example.missing.demo.svc.cluster.local.": dns.RcodeNameError,
		"a.b-.missing.demo.svc.cluster.local.":        dns.RcodeNameError,
		"_http._tcp.missing.demo.svc.cluster.local.":  dns.RcodeServerFailure,
		"web-0.missing.demo.svc.cluster.local.":       dns.RcodeServerFailure,
		"fd00--1.missing.demo.svc.cluster.local.":     dns.RcodeServerFailure,
	} {
		if got := f.query(name, dns.TypeA); got.Rcode != want {
			t.Errorf("%s: rcode %s, want %s", name, dns.RcodeToString[got.Rcode], dns.RcodeToString[want])
		}
	}
}

// In clusterset.local, where mcs is authoritative, a name no object can
// have is NXDOMAIN before sync as after; one that may be an import's waits.
func TestUnsyncedClustersetShapes(t *testing.T) {
	m, _ := neverSynced(t, baseConfig())
	for name, want := range map[string]int{
		"_www._example.serve.demo.svc.clusterset.local.": dns.RcodeNameError,
		"_example.serve.demo.svc.clusterset.local.":      dns.RcodeNameError,
		"serve.bad_ns.svc.clusterset.local.":             dns.RcodeNameError,
		"_http._tcp.serve.demo.svc.clusterset.local.":    dns.RcodeServerFailure,
		"web-0.member2.serve.demo.svc.clusterset.local.": dns.RcodeServerFailure,
		"serve.demo.svc.clusterset.local.":               dns.RcodeServerFailure,
	} {
		if got := serve(t, m, name, dns.TypeA); got.Rcode != want {
			t.Errorf("%s: rcode %s, want %s", name, dns.RcodeToString[got.Rcode], dns.RcodeToString[want])
		}
	}
}

// With the kubernetes plugin's zonal option, before mcs has synced, the
// zonal names of a headless import (whose derived-<svc> Service is
// headless) wait, as its other names do; those of a ClusterIP import can
// never be mcs's, and keep the kubernetes plugin's NXDOMAIN, as does a
// ClusterIP derived Service's.
func TestUnsyncedZonalNames(t *testing.T) {
	c := caddy.NewTestController("dns", "kubernetes "+testZone+" {\nzonal\n}")
	c.Next()
	k, err := kubernetes.ParseStanza(c)
	if err != nil {
		t.Fatal(err)
	}
	k.APIConn = newSliceAPI([]*corev1.Service{
		serviceObj("demo", api.DerivedPrefix+"serve", []string{vipSet}, httpPort),
		serviceObj("demo", api.DerivedPrefix+"db", nil, httpPort),
	}, nil)
	m, _ := neverSynced(t, baseConfig())
	m.Next, m.kube = k, kubePeerOf([]plugin.Handler{k})
	for name, want := range map[string]int{
		"zone-a.pin._zone.db.demo.svc.cluster.local.":            dns.RcodeServerFailure,
		"zone-a.prefer._zone.db.demo.svc.cluster.local.":         dns.RcodeServerFailure,
		"zone-a.pin._zone.serve.demo.svc.cluster.local.":         dns.RcodeNameError,
		"zone-a.pin._zone.derived-serve.demo.svc.cluster.local.": dns.RcodeNameError,
		"zone-a.near._zone.db.demo.svc.cluster.local.":           dns.RcodeNameError,
	} {
		if got := serve(t, m, name, dns.TypeA); got.Rcode != want {
			t.Errorf("%s: rcode %s, want %s", name, dns.RcodeToString[got.Rcode], dns.RcodeToString[want])
		}
	}
}
