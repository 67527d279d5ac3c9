package mcs

import (
	"slices"
	"strings"
	"testing"
	"time"

	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
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
	if svc.name() != "serve" || svc.headless || len(svc.ips) != 2 || len(svc.ips[0]) != 4 || !slices.Equal(slices.Collect(svc.ports.all()), []port{{"http", "tcp", 80}}) {
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
	got := toSlice(s, false)
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
	if local := toSlice(localSlice("demo", "web", "y", nil), false); local.imported || local.service != "web" {
		t.Fatalf("local slice read as %+v", local)
	}
	for _, cluster := range []string{"", "Not_A_Label"} {
		bad := importedSlice("demo", "web", cluster, "z", nil, ep{ip: "10.2.0.7"})
		if cluster == "" {
			delete(bad.Labels, mcsv1b1.LabelSourceCluster)
		}
		if got := toSlice(bad, false); got.service != "" {
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
	if ns := got.(*namespace); ns.name() != "demo" {
		t.Fatalf("namespace read as %+v", ns)
	}
}

// A trimmed object gives client-go's key function the key the API object
// would have, and its resourceVersion, while this code reads its namespace
// and name.
func TestObjectMeta(t *testing.T) {
	for _, c := range []struct{ namespace, name, rv, key string }{
		{"demo", "serve", "1042", "demo/serve"},
		{"", "demo", "7", "demo"},
		{"demo", "no-version", "", "demo/no-version"},
	} {
		m := newMeta(c.namespace, c.name, c.rv)
		api := &metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, ResourceVersion: c.rv}
		want, _ := cache.MetaNamespaceKeyFunc(api)
		got, err := cache.DeletionHandlingMetaNamespaceKeyFunc(&m)
		if err != nil || got != want || got != c.key {
			t.Errorf("%s/%s: keyed %q (%v), want %q", c.namespace, c.name, got, err, want)
		}
		if m.namespace() != c.namespace || m.name() != c.name || m.GetObjectMeta().GetResourceVersion() != c.rv {
			t.Errorf("%s/%s@%s: read back as %q %q %q", c.namespace, c.name, c.rv, m.namespace(), m.name(), m.GetObjectMeta().GetResourceVersion())
		}
	}
}

// A list of ports reads back as written, and equal lists share one copy.
func TestPortList(t *testing.T) {
	ports := []port{newPort("HTTP", "", 80), newPort("", "UDP", 53), newPort(strings.Repeat("p", 300), "SCTP", 65535)}
	l := newPortList(ports)
	if got := slices.Collect(l.all()); !slices.Equal(got, ports) {
		t.Fatalf("read back %v, want %v", got, ports)
	}
	if again := newPortList(slices.Clone(ports)); again != l {
		t.Fatal("equal lists of ports are held twice")
	}
	for _, empty := range []portList{newPortList(nil), {}} {
		if got := slices.Collect(empty.all()); len(got) != 0 {
			t.Fatalf("an empty list reads back %v", got)
		}
	}
}
