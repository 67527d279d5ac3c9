package mcs

import (
	"net"
	"testing"
	"time"

	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimService(t *testing.T) {
	s := serviceObj("demo", "serve", []string{"10.96.0.1", "fd00::1"}, portSpec{"HTTP", "", 80})
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	s.Annotations = map[string]string{"big": "annotation"}
	got, err := trim(s)
	if err != nil {
		t.Fatal(err)
	}
	svc := got.(*service)
	if svc.name != "serve" || svc.headless || len(svc.ips) != 2 || len(svc.ips[0]) != 4 || svc.ports[0] != (port{"http", "tcp", 80}) {
		t.Fatalf("trimmed to %+v", svc)
	}
	if again, _ := trim(svc); again != any(svc) {
		t.Fatal("trim is not idempotent")
	}
	if h := toService(serviceObj("demo", "h", nil)); !h.headless || h.ips != nil {
		t.Fatalf("headless service trimmed to %+v", h)
	}
}

func TestTrimSlice(t *testing.T) {
	s := importedSlice("demo", "web", "member2", "x", []portSpec{httpPort},
		ep{ip: "10.2.0.5", hostname: "Web-0"}, ep{ip: "10.2.0.6", notReady: true}, ep{ip: "fd00::"}, ep{ip: "not-an-ip"})
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.2.0.9"}}) // ready unset counts as ready
	got := toSlice(s)
	if !got.imported || got.service != "web" || got.cluster != "member2" {
		t.Fatalf("labels read as %+v", got)
	}
	var hosts []string
	for _, e := range got.endpoints {
		hosts = append(hosts, e.hostname())
	}
	if !equal(hosts, "web-0", "fd00--0", "10-2-0-9") {
		t.Fatalf("ready endpoints named %v", hosts)
	}
	if local := toSlice(localSlice("demo", "web", "y", nil)); local.imported || local.service != "web" {
		t.Fatalf("local slice read as %+v", local)
	}
	for _, cluster := range []string{"", "Not_A_Label"} {
		bad := importedSlice("demo", "web", cluster, "z", nil, ep{ip: "10.2.0.7"})
		if cluster == "" {
			delete(bad.Labels, mcsv1b1.LabelSourceCluster)
		}
		if got := toSlice(bad); got.service != "" {
			t.Errorf("imported slice with source cluster %q kept for service %q", cluster, got.service)
		}
	}
}

// An endpoint without a hostname is named by its address as the slice
// spells it, dashed (as the kubernetes plugin names it); only a spelling
// other than the canonical one is kept, the rest is worked out when asked.
func TestEndpointNames(t *testing.T) {
	cases := []struct {
		addr, hostname, want string
		kept                 bool
	}{
		{addr: "10.2.0.5", want: "10-2-0-5"},
		{addr: "fd00::", want: "fd00--0"},
		{addr: "fd00::1", want: "fd00--1"},
		{addr: "FD00::1", want: "fd00--1"},
		{addr: "fd00:0::2", want: "fd00-0--2", kept: true},
		{addr: "::ffff:10.2.0.8", want: "--ffff-10-2-0-8", kept: true},
		{addr: "10.2.0.6", hostname: "Web-0", want: "web-0", kept: true},
	}
	for _, c := range cases {
		ip := net.ParseIP(c.addr)
		e := newEndpoint(ip, c.addr, c.hostname)
		if got := e.hostname(); got != c.want || !e.named(c.want) || e.named(c.want+"x") {
			t.Errorf("%s (hostname %q): named %q, want %q", c.addr, c.hostname, got, c.want)
		}
		if (e.host != "") != c.kept {
			t.Errorf("%s (hostname %q): name kept %q, want kept %v", c.addr, c.hostname, e.host, c.kept)
		}
		if got := e.ip(); !got.Equal(ip) || len(got) != len(parseIP(c.addr)) {
			t.Errorf("%s: address %v (%d bytes), want %v as parseIP gives it", c.addr, got, len(got), ip)
		}
	}
}

func TestTrimLease(t *testing.T) {
	renewed := time.Now()
	l := toLease(leaseObj("member2", renewed, 30))
	if l.cluster != "member2" || !l.expiry.Equal(renewed.Add(30*time.Second)) {
		t.Fatalf("lease read as %+v", l)
	}
	other := leaseObj("x", renewed, 30)
	other.Name, other.Spec.RenewTime = "unrelated", nil
	if l := toLease(other); l.cluster != "" || !l.expiry.IsZero() {
		t.Fatalf("unrelated lease read as %+v", l)
	}
}

func TestTrimNamespace(t *testing.T) {
	got, _ := trim(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo", Labels: map[string]string{"a": "b"}}})
	if ns := got.(*namespace); ns.name != "demo" {
		t.Fatalf("namespace read as %+v", ns)
	}
}
