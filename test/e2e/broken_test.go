//go:build lab

package e2e

import (
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// ordinaryQuery is a name mcs passes on, with what the kubernetes plugin
// answers it.
type ordinaryQuery struct {
	qname     string
	qtype     uint16
	rcode, an int
}

// ordinary writes a plain ClusterIP Service and a headless one with an
// endpoint, and returns their names, a missing one, and the search-path
// expansions of an external name (www.example.com, in the pod's namespace
// and in svc.cluster.local), which look like a port's and an endpoint's.
func (f *fixture) ordinary() []ordinaryQuery {
	f.t.Helper()
	f.apply(
		f.service("plain", false),
		f.ownSlice("plain", ep("10.10.7.1")),
		f.service("hl", true),
		f.ownSlice("hl", ep("10.10.7.2").named("hl-0")),
	)
	return []ordinaryQuery{
		{f.native("plain"), dns.TypeA, dns.RcodeSuccess, 1},
		{f.native("plain"), dns.TypeSRV, dns.RcodeSuccess, 2},
		{f.native("hl"), dns.TypeA, dns.RcodeSuccess, 1},
		{f.native("hl-0", "hl"), dns.TypeA, dns.RcodeSuccess, 1},
		{f.native("missing"), dns.TypeA, dns.RcodeNameError, 0},
		{f.native("www", "example", "com"), dns.TypeA, dns.RcodeNameError, 0},
		{"www.example.com.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, 0},
	}
}

// expectOrdinary checks that s answers every query as kube, the kubernetes
// plugin alone, does, byte for byte, before mcs has synced too: none of
// them may be an import's. A denial is compared but for its SOA serial: two
// kubernetes plugins' serials are the second each saw the last change,
// which may differ by one.
func expectOrdinary(t *testing.T, s, kube *server, qs []ordinaryQuery) {
	t.Helper()
	for _, q := range qs {
		if q.rcode != dns.RcodeNameError {
			expectSame(t, s, kube, q.qname, q.qtype, q.rcode, q.an)
			continue
		}
		expectSame(t, kube, kube, q.qname, q.qtype, q.rcode, q.an) // kube denies it
		m, err := kube.ask(t.Context(), q.qname, q.qtype, "udp")
		if err != nil {
			t.Fatal(err)
		}
		s.expect(t, q.qname, q.qtype, summarize(m))
	}
}

// TestWithoutPermissions: mcs with credentials that may read nothing never
// syncs. It stays not ready, says why in the log and in api_status, and
// every ordinary name keeps the kubernetes plugin's answer, its NXDOMAINs
// too, so that search paths go on; only an import's name (its
// derived-<svc> Service exists) is SERVFAIL.
func TestWithoutPermissions(t *testing.T) {
	f := newFixture(t)
	qs := f.ordinary()
	f.apply(f.derivedService("imp", false))
	p := startCoreDNS(t, config{blocks: []block{vipBlock, kubernetesBlock}, kubeconfig: f.powerlessKubeconfig()})
	s, kube := p.servers[0], p.servers[1]
	expectOrdinary(t, s, kube, qs)
	s.expect(t, f.native("imp"), dns.TypeA, servfail)
	p.expectMetric(t, series("coredns_mcs_api_status", "status", "forbidden"), 1)
	p.expectLog(t, "refuses mcs's credentials", "403 Forbidden", "not synced")
	if code, body, err := process.HTTPGet(t.Context(), p.readyURL); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("/ready: %d %q, %v; want 503", code, body, err)
	}
}

// powerlessKubeconfig is the lab's kubeconfig whose context of f's cluster
// authenticates as a new ServiceAccount without any role: it may discover
// the API and read nothing.
func (f *fixture) powerlessKubeconfig() string {
	f.t.Helper()
	ctx := f.t.Context()
	client := f.lab.Client(f.t, f.cluster)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "powerless"}}
	if _, err := client.CoreV1().ServiceAccounts(f.ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts(f.ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg, err := clientcmd.LoadFromFile(f.lab.Kubeconfig())
	if err != nil {
		f.t.Fatal(err)
	}
	cfg.AuthInfos["powerless"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[f.cluster].AuthInfo = "powerless"
	path := filepath.Join(f.t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		f.t.Fatal(err)
	}
	return path
}

const serviceImportCRD = "serviceimports.multicluster.x-k8s.io"

// TestServiceImportCRDLater: in a cluster without the ServiceImport CRD
// (the lab's hub, whose controller reads no ServiceImports) mcs is ready
// with no imports and ordinary names keep the kubernetes plugin's answers;
// once the CRD is installed, imports are answered without a restart. The
// test installs a copy of member1's CRD on the hub and removes it at the end.
func TestServiceImportCRDLater(t *testing.T) {
	lab := labtest.Get(t)
	crds := lab.Dynamic(t, labtest.Hub).Resource(labtest.CRDs)
	if _, err := crds.Get(t.Context(), serviceImportCRD, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the hub must not serve ServiceImports for this test (someone else's CRD?): get %s: %v", serviceImportCRD, err)
	}
	f := newFixtureIn(t, labtest.Hub)
	qs := f.ordinary()
	p := startCoreDNS(t, config{blocks: []block{vipBlock, kubernetesBlock}, context: labtest.Hub})
	p.waitReady(t, 20*time.Second)
	s, kube := p.servers[0], p.servers[1]
	p.expectLog(t, "serves no ServiceImport", "no imports until the MCS API CRDs are installed")
	p.expectMetric(t, series("coredns_mcs_informers_synced", "resource", "serviceimports"), 0)
	expectOrdinary(t, s, kube, qs)

	installServiceImportCRD(t, lab, "v1beta1", "v1alpha1")
	f.apply(
		f.serviceImport("imp", importSpec{strategy: remoteAndLocal, ips: []string{"10.99.0.9"}}),
		f.importedSlice("imp", member2, ep("10.12.7.1")),
	)
	native, clusterset := f.native("imp"), f.clusterset("imp")
	// One discovery poll (10 s) after the CRD is served, then one list.
	s.expectWithin(t, 30*time.Second, native, dns.TypeA, answer(s.addrs(native, "10.99.0.9")))
	s.expect(t, clusterset, dns.TypeA, answer(s.addrs(clusterset, "10.99.0.9")))
	p.expectLog(t, "ServiceImport v1beta1 is served now")
	p.expectMetric(t, series("coredns_mcs_informers_synced", "resource", "serviceimports"), 1)
	expectOrdinary(t, s, kube, qs)
}
