package mcs

import (
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
	for e := range got.all() {
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
