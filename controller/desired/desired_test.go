package desired

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func svc(headless bool, ports ...corev1.ServicePort) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", CreationTimestamp: metav1.NewTime(t0)}, Spec: corev1.ServiceSpec{Ports: ports}}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

func port(name string, number int32, proto corev1.Protocol) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Port: number, Protocol: proto}
}

func exportAt(minutes int) *mcsv1b1.ServiceExport {
	return &mcsv1b1.ServiceExport{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(minutes) * time.Minute))}}
}

func slice(name string, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Generation: 3}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, NodeName: ptr.To("node"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

func multi(strategy api.Strategy, provision, consumption []v1alpha1.ClusterName) *v1alpha1.MultiClusterService {
	return &v1alpha1.MultiClusterService{Spec: v1alpha1.MultiClusterServiceSpec{
		Types: []v1alpha1.ExposureType{v1alpha1.CrossCluster}, Strategy: strategy,
		ServiceProvisionClusters: provision, ServiceConsumptionClusters: consumption,
	}}
}

func TestComputeStoryOne(t *testing.T) {
	in := &Input{Namespace: "ns", Name: "foo", MCS: multi(api.LocalFirst, []v1alpha1.ClusterName{"m1"}, []v1alpha1.ClusterName{"m2"}), Members: map[string]Member{
		"m1": {Known: true, Service: svc(false, port("http", 80, "")), Slices: []*discoveryv1.EndpointSlice{slice("foo-a", "10.0.0.1", "10.0.0.2")}},
		"m2": {Known: true},
		"m3": {Known: true, Service: svc(false, port("http", 80, ""))}, // not a provision cluster: its Service does not count
	}}
	p := Compute(in)
	if p.Invalid != "" {
		t.Fatalf("invalid: %s", p.Invalid)
	}
	if !slices.Equal(p.Provision, []string{"m1"}) || !slices.Equal(p.Consumption, []string{"m2"}) || p.Native[api.AnnotationStrategy] != string(api.LocalFirst) {
		t.Errorf("provision %v consumption %v native %v", p.Provision, p.Consumption, p.Native)
	}
	want := []mcsv1b1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	if p.Import == nil || p.Import.Headless || !slices.Equal(p.Import.Ports, want) || !slices.Equal(p.Import.Clusters, []string{"m1"}) {
		t.Fatalf("import %+v, want ClusterSetIP with %v from m1", p.Import, want)
	}
	if len(p.Slices) != 1 {
		t.Fatalf("%d slices, want 1", len(p.Slices))
	}
	s := p.Slices[0]
	if s.Name != "imported-m1-foo-a" || s.Labels[mcsv1b1.LabelSourceCluster] != "m1" || s.Labels[mcsv1b1.LabelServiceName] != "foo" ||
		s.Labels[discoveryv1.LabelServiceName] != "derived-foo" || s.Labels[discoveryv1.LabelManagedBy] != api.ManagedBy ||
		s.Annotations[api.AnnotationSourceGeneration] != "3" {
		t.Errorf("imported slice %s labels %v annotations %v", s.Name, s.Labels, s.Annotations)
	}
	if len(s.Endpoints) != 2 || s.Endpoints[0].NodeName != nil || s.Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Errorf("endpoints %+v, want both addresses without the source node", s.Endpoints)
	}
	if len(p.Propagate) != 0 {
		t.Errorf("propagate %v without a hub Service", p.Propagate)
	}
}

func TestComputeExportsAndHub(t *testing.T) {
	hub := svc(false, port("http", 80, ""))
	hub.Spec.Selector = map[string]string{"app": "foo"}
	hub.Spec.ClusterIP = "10.21.0.9"
	in := &Input{Name: "foo", HubService: hub, Members: map[string]Member{
		"m1": {Known: true, Service: svc(false, port("http", 80, "")), Export: exportAt(0)},
		"m2": {Known: true, Service: svc(false, port("http", 80, ""))}, // no export: not a provider
		"m3": {Known: true, Export: exportAt(0)},                       // export without Service: not a provider
	}}
	p := Compute(in)
	if !slices.Equal(p.Provision, []string{"m1"}) || !slices.Equal(p.Consumption, []string{"m1", "m2", "m3"}) || p.Native != nil {
		t.Errorf("exports only: provision %v consumption %v native %v", p.Provision, p.Consumption, p.Native)
	}
	if len(p.Propagate) != 0 {
		t.Errorf("a hub Service propagates without a MultiClusterService: %v", p.Propagate)
	}

	in.MCS = multi("", nil, []v1alpha1.ClusterName{"m2"})
	p = Compute(in)
	if !slices.Equal(p.Provision, []string{"m1", "m2"}) || !slices.Equal(p.Consumption, []string{"m2"}) || p.Native[api.AnnotationStrategy] != string(api.RemoteAndLocal) {
		t.Errorf("with a MultiClusterService: provision %v consumption %v native %v", p.Provision, p.Consumption, p.Native)
	}
	prop := p.Propagate["m1"]
	if len(p.Propagate) != 2 || prop == nil || prop.Spec.ClusterIP != "" || prop.Spec.Selector["app"] != "foo" || prop.Labels[api.LabelManagedBy] != api.ManagedBy {
		t.Errorf("propagate %v (m1: %+v), want m1 and m2 with the hub's selector and no ClusterIP", p.Propagate, prop)
	}
}

// A member that may not export from the namespace provides nothing, by
// export, by being named, or by having the Service; it still consumes.
func TestNotAllowed(t *testing.T) {
	bounded := Member{Known: true, Service: svc(false, port("http", 80, "")), Export: exportAt(0), Slices: []*discoveryv1.EndpointSlice{slice("foo-b", "10.0.0.2")}, NotAllowed: "m2 may export from shop only"}
	for _, tc := range []struct {
		name string
		mcs  *v1alpha1.MultiClusterService
	}{
		{"export", nil},
		{"named", multi("", []v1alpha1.ClusterName{"m1", "m2"}, nil)},
		{"has the Service", multi("", nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{Namespace: "ns", Name: "foo", MCS: tc.mcs, Members: map[string]Member{
				"m1": {Known: true, Service: svc(false, port("http", 80, "")), Export: exportAt(1), Slices: []*discoveryv1.EndpointSlice{slice("foo-a", "10.0.0.1")}},
				"m2": bounded,
			}}
			p := Compute(in)
			if !slices.Equal(p.Provision, []string{"m1"}) || !slices.Equal(p.Consumption, []string{"m1", "m2"}) {
				t.Errorf("provision %v consumption %v, want m1 providing to both", p.Provision, p.Consumption)
			}
			if len(p.Slices) != 1 || p.Slices[0].Labels[mcsv1b1.LabelSourceCluster] != "m1" {
				t.Errorf("slices %v, want m1's only", p.Slices)
			}
			if c := p.NotAllowed["m2"]; c.Reason != ReasonNamespaceNotAllowed || c.Message != bounded.NotAllowed {
				t.Errorf("m2 not allowed: %+v", c)
			}
			if p.Import == nil || !slices.Equal(p.Import.Clusters, []string{"m1"}) {
				t.Errorf("import %+v, want m1 its only cluster", p.Import)
			}
		})
	}
	// Alone, it makes nothing to import, so no namespace in any consumer.
	p := Compute(&Input{Namespace: "ns", Name: "foo", Members: map[string]Member{"m1": {Known: true}, "m2": bounded}})
	if len(p.Provision) != 0 || p.Import != nil || len(p.Slices) != 0 {
		t.Errorf("a bounded member alone plans provision %v import %+v", p.Provision, p.Import)
	}
}

func TestPortMergeAndConflicts(t *testing.T) {
	in := &Input{Name: "foo", Members: map[string]Member{
		"old":   {Known: true, Export: exportAt(0), Service: svc(false, port("http", 80, ""), port("dns", 53, corev1.ProtocolUDP))},
		"newer": {Known: true, Export: exportAt(5), Service: svc(false, port("http", 8080, ""), port("metrics", 9090, ""))},
		"type":  {Known: true, Export: exportAt(9), Service: svc(true, port("dns", 53, corev1.ProtocolUDP))},
	}}
	p := Compute(in)
	want := []mcsv1b1.ServicePort{
		{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
		{Name: "metrics", Port: 9090, Protocol: corev1.ProtocolTCP},
	}
	if !slices.Equal(p.Import.Ports, want) || p.Import.Headless {
		t.Errorf("ports %v headless %v, want %v from the union, ClusterSetIP from the oldest", p.Import.Ports, p.Import.Headless, want)
	}
	if c := p.Conflicts["newer"]; c.Reason != mcsv1b1.ServiceExportReasonPortConflict || !strings.Contains(c.Message, `"http"`) {
		t.Errorf("newer: %+v, want a PortConflict on http", c)
	}
	if c := p.Conflicts["type"]; c.Reason != mcsv1b1.ServiceExportReasonTypeConflict {
		t.Errorf("type: %+v, want a TypeConflict", c)
	}
	// The oldest export's definition is used, but it lacks a port of the
	// union: KEP-1645's asymmetric ports, a conflict on every export.
	if c := p.Conflicts["old"]; c.Reason != mcsv1b1.ServiceExportReasonPortConflict || !strings.Contains(c.Message, "lacks the port(s) 9090/TCP") {
		t.Errorf("old: %+v, want a PortConflict for lacking 9090/TCP", c)
	}
	// The oldest wins whatever the names: make "type" the oldest.
	in.Members["type"] = Member{Known: true, Export: exportAt(-1), Service: in.Members["type"].Service}
	if p := Compute(in); !p.Import.Headless || p.Conflicts["old"].Reason != mcsv1b1.ServiceExportReasonTypeConflict {
		t.Errorf("with the headless export oldest: headless %v, conflicts %v", p.Import.Headless, p.Conflicts)
	}
}

// The oldest export is the one the hub saw first; what members report
// orders only those first seen together, and one not seen yet is newest.
func TestOldestByFirstSeen(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	for _, tc := range []struct {
		name     string
		seen     map[string]time.Time
		reported map[string]int // export creation, in minutes
		oldest   string
	}{
		{"first seen beats reported", map[string]time.Time{"a": at(0), "b": at(1)}, map[string]int{"a": 5, "b": -500}, "a"},
		{"not seen yet is newest", map[string]time.Time{"b": at(9)}, map[string]int{"a": -500, "b": 5}, "b"},
		{"seen together: reported", map[string]time.Time{"a": at(1), "b": at(1)}, map[string]int{"a": 5, "b": 2}, "b"},
		{"none seen: reported", nil, map[string]int{"a": 5, "b": 2}, "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := map[string]Member{}
			for c, m := range tc.reported {
				ms[c] = Member{Known: true, Export: exportAt(m), Service: svc(c == tc.oldest, port("http", 80, "")), FirstSeen: tc.seen[c]}
			}
			// The oldest's type, headless, is the import's.
			if p := Compute(&Input{Name: "foo", Members: ms}); !p.Import.Headless || p.Conflicts[tc.oldest].Reason != "" {
				t.Errorf("headless %v, conflicts %v: want %s the oldest", p.Import.Headless, p.Conflicts, tc.oldest)
			}
		})
	}
}

// validServicePorts says what the API server would refuse of a Service
// with these ports: a port twice, a name twice, an unnamed one of several.
func validServicePorts(ports []mcsv1b1.ServicePort) string {
	keys, names := map[string]bool{}, map[string]bool{}
	for _, p := range ports {
		key := fmt.Sprintf("%d/%s", p.Port, p.Protocol)
		switch {
		case keys[key]:
			return "port " + key + " twice"
		case names[p.Name]:
			return fmt.Sprintf("name %q twice", p.Name)
		case p.Name == "" && len(ports) > 1:
			return "an unnamed port among several"
		}
		keys[key], names[p.Name] = true, true
	}
	return ""
}

// The KEP's port merge: a port is its number and protocol; the older
// export's definition wins; the union is always a valid Service.
func TestPortMergeByNumber(t *testing.T) {
	for _, tc := range []struct {
		name         string
		older, newer []corev1.ServicePort
		want         []mcsv1b1.ServicePort
		conflict     string // in newer's PortConflict message; "" for none
		oldLacks     string // in older's PortConflict message; "" for none
	}{
		{"same port, other name", []corev1.ServicePort{port("http", 80, "")}, []corev1.ServicePort{port("web", 80, "")},
			[]mcsv1b1.ServicePort{{Name: "http", Port: 80, Protocol: "TCP"}}, `named "web", but an older export has it named "http"`, ""},
		{"named and unnamed", []corev1.ServicePort{port("", 80, "")}, []corev1.ServicePort{port("http", 80, "")},
			[]mcsv1b1.ServicePort{{Port: 80, Protocol: "TCP"}}, "port 80/TCP is named \"http\", but an older export has it unnamed", ""},
		{"an unnamed port cannot join", []corev1.ServicePort{port("", 80, "")}, []corev1.ServicePort{port("", 81, "")},
			[]mcsv1b1.ServicePort{{Port: 80, Protocol: "TCP"}}, "unnamed port is 81/TCP", ""},
		{"a second port needs names", []corev1.ServicePort{port("", 80, "")}, []corev1.ServicePort{port("metrics", 9090, "")},
			[]mcsv1b1.ServicePort{{Port: 80, Protocol: "TCP"}}, "must name each", ""},
		{"other protocol, same number", []corev1.ServicePort{port("dns", 53, "UDP")}, []corev1.ServicePort{port("dns-tcp", 53, "TCP")},
			[]mcsv1b1.ServicePort{{Name: "dns", Port: 53, Protocol: "UDP"}, {Name: "dns-tcp", Port: 53, Protocol: "TCP"}}, "lacks the port(s) 53/UDP", "lacks the port(s) 53/TCP"},
		// The MCS API conformance suite's asymmetric ports: a superset.
		{"more ports", []corev1.ServicePort{port("tcp", 42, ""), port("udp", 42, "UDP")}, []corev1.ServicePort{port("tcp", 42, ""), port("sctp", 142, "SCTP")},
			[]mcsv1b1.ServicePort{{Name: "tcp", Port: 42, Protocol: "TCP"}, {Name: "udp", Port: 42, Protocol: "UDP"}, {Name: "sctp", Port: 142, Protocol: "SCTP"}}, "lacks the port(s) 42/UDP", "lacks the port(s) 142/SCTP"},
		{"the same", []corev1.ServicePort{port("http", 80, "")}, []corev1.ServicePort{port("http", 80, "TCP")},
			[]mcsv1b1.ServicePort{{Name: "http", Port: 80, Protocol: "TCP"}}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Compute(&Input{Name: "foo", Members: map[string]Member{
				"old":   {Known: true, Export: exportAt(0), Service: svc(false, tc.older...)},
				"newer": {Known: true, Export: exportAt(5), Service: svc(false, tc.newer...)},
			}})
			if !slices.Equal(p.Import.Ports, tc.want) {
				t.Errorf("ports %+v, want %+v", p.Import.Ports, tc.want)
			}
			c, has := p.Conflicts["newer"]
			switch {
			case tc.conflict == "" && has:
				t.Errorf("conflict %+v, want none", c)
			case tc.conflict != "" && (c.Reason != mcsv1b1.ServiceExportReasonPortConflict || !strings.Contains(c.Message, tc.conflict)):
				t.Errorf("conflict %+v, want a PortConflict saying %q", c, tc.conflict)
			}
			if c, has := p.Conflicts["old"]; has != (tc.oldLacks != "") || !strings.Contains(c.Message, tc.oldLacks) {
				t.Errorf("the older export's own conflict %+v, want one saying %q", c, tc.oldLacks)
			}
			// Every export says the exports conflict, the oldest too.
			want := cmp.Or(tc.oldLacks, tc.conflict)
			if c, ok := p.ConflictOf("old"); ok != (want != "") || (ok && (c.Reason != mcsv1b1.ServiceExportReasonPortConflict || !strings.Contains(c.Message, want))) {
				t.Errorf("the older export's conflict %+v (%v), want one saying %q", c, ok, want)
			}
		})
	}
}

func TestInvalid(t *testing.T) {
	members := map[string]Member{"m1": {Known: true, Service: svc(false)}}
	for _, tc := range []struct {
		name string
		in   *Input
		want string
	}{
		{"unknown cluster", &Input{Name: "foo", Members: members, MCS: multi("", nil, []v1alpha1.ClusterName{"m9"})}, `spec.serviceConsumptionClusters: unknown cluster "m9"`},
		{"unknown provision cluster", &Input{Name: "foo", Members: members, MCS: multi("", []v1alpha1.ClusterName{"x"}, nil)}, `spec.serviceProvisionClusters: unknown cluster "x"`},
		{"unknown strategy", &Input{Name: "foo", Members: members, MCS: multi("Nearest", nil, nil)}, `spec.strategy: unknown strategy "Nearest"`},
		{"unknown type", &Input{Name: "foo", Members: members, MCS: &v1alpha1.MultiClusterService{Spec: v1alpha1.MultiClusterServiceSpec{Types: []v1alpha1.ExposureType{"LoadBalancer"}}}}, `spec.types: unknown type "LoadBalancer"`},
		{"no type", &Input{Name: "foo", Members: members, MCS: &v1alpha1.MultiClusterService{}}, "spec.types is empty"},
		{"long name", &Input{Name: strings.Repeat("a", 56), Members: members}, "cannot have a Service derived-"},
		{"bad name", &Input{Name: "Foo", Members: members}, `service name "Foo"`},
		{"protected export", &Input{Name: "kubernetes", Members: members, Protected: "the API server's Service"}, "the API server's Service"},
		{"protected", &Input{Name: "kubernetes", Members: members, MCS: multi("", nil, nil), Protected: "the API server's Service"}, "the API server's Service"},
		{"localFirst without LocalFirst", &Input{Name: "foo", Members: members, MCS: localFirst(api.RemoteAndLocal, nil, ptr.To[int32](2))}, "spec.localFirst applies to strategy LocalFirst only"},
		{"minReadyEndpoints 0", &Input{Name: "foo", Members: members, MCS: localFirst(api.LocalFirst, nil, ptr.To[int32](0))}, "spec.localFirst.minReadyEndpoints is 0, want at least 1"},
		{"failover twice", &Input{Name: "foo", Members: members, MCS: localFirst(api.LocalFirst, []v1alpha1.ClusterName{"m1", "m1"}, nil)}, `spec.localFirst.failoverOrder names cluster "m1" twice`},
		{"failover unknown", &Input{Name: "foo", Members: members, MCS: localFirst(api.LocalFirst, []v1alpha1.ClusterName{"m7"}, nil)}, `spec.localFirst.failoverOrder: unknown cluster "m7"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Compute(tc.in)
			msg := p.Invalid
			if tc.in.MCS == nil && p.Unexportable != nil { // a name no ServiceExport can have
				msg = p.Unexportable.Message
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("invalid %q, unexportable %+v, want it to say %q", p.Invalid, p.Unexportable, tc.want)
			}
			if p.Import != nil || len(p.Slices) > 0 || len(p.Consumption) > 0 {
				t.Errorf("an invalid spec still plans %+v", p)
			}
		})
	}
}

func TestUnknownMembers(t *testing.T) {
	in := &Input{Name: "foo", Members: map[string]Member{
		"m1": {}, // never synced
		"m2": {Known: true, Service: svc(false, port("", 80, "")), Export: exportAt(0), Slices: []*discoveryv1.EndpointSlice{
			slice("a", "10.0.0.1"),
			{ObjectMeta: metav1.ObjectMeta{Name: "fqdn"}, AddressType: discoveryv1.AddressTypeFQDN},
		}},
	}}
	p := Compute(in)
	if !p.IsUnknown("m1") || p.IsUnknown("m2") || !slices.Equal(p.Provision, []string{"m2"}) {
		t.Errorf("unknown %v provision %v", p.Unknown, p.Provision)
	}
	if len(p.Slices) != 1 || len(p.Skipped) != 1 || !strings.Contains(p.Skipped[0], "m2: EndpointSlice fqdn has address type FQDN") {
		t.Errorf("slices %d skipped %v, want the FQDN slice skipped with its reason", len(p.Slices), p.Skipped)
	}
}

func TestImportedName(t *testing.T) {
	if got := ImportedName("member1", "foo-abcde"); got != "imported-member1-foo-abcde" {
		t.Errorf("short name: %s", got)
	}
	long := strings.Repeat("a", 240) + ".b-c"
	got := ImportedName("member1", long)
	if len(got) != validation.DNS1123SubdomainMaxLength || len(validation.IsDNS1123Subdomain(got)) > 0 {
		t.Errorf("long name %q (%d): %v", got, len(got), validation.IsDNS1123Subdomain(got))
	}
	if other := ImportedName("member1", strings.Repeat("a", 240)+".b-d"); other == got {
		t.Errorf("two long names shorten to the same %s", got)
	}
	if again := ImportedName("member1", long); again != got {
		t.Errorf("not deterministic: %s, %s", got, again)
	}
	// A cut that would end in a dot or dash is trimmed before the hash.
	for n := 200; n < 253; n++ {
		name := ImportedName("m", strings.Repeat("a.", n))
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Fatalf("%q: %v", name, errs)
		}
	}
}

// Cluster a's slice b-c and cluster a-b's slice c spell the same
// imported-a-b-c: each gets a name of its own, the same at every sync.
func TestImportedNamesNeverClash(t *testing.T) {
	in := &Input{Name: "foo", Members: map[string]Member{
		"a":   {Known: true, Export: exportAt(0), Service: svc(false), Slices: []*discoveryv1.EndpointSlice{slice("b-c", "10.0.0.1")}},
		"a-b": {Known: true, Export: exportAt(1), Service: svc(false), Slices: []*discoveryv1.EndpointSlice{slice("c", "10.0.0.2")}},
		"x":   {Known: true, Export: exportAt(2), Service: svc(false), Slices: []*discoveryv1.EndpointSlice{slice("y", "10.0.0.3")}},
	}}
	p := Compute(in)
	names := map[string]string{}
	for _, s := range p.Slices {
		if other, ok := names[s.Name]; ok {
			t.Fatalf("%s and %s are both imported as %s", other, s.Labels[mcsv1b1.LabelSourceCluster], s.Name)
		}
		names[s.Name] = s.Labels[mcsv1b1.LabelSourceCluster]
		if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
			t.Errorf("%s: %v", s.Name, errs)
		}
	}
	if _, ok := names["imported-x-y"]; !ok {
		t.Errorf("names %v: a slice without a clash must keep its plain name", names)
	}
	again := Compute(in)
	for i := range p.Slices {
		if again.Slices[i].Name != p.Slices[i].Name {
			t.Errorf("not the same at the next sync: %s, %s", p.Slices[i].Name, again.Slices[i].Name)
		}
	}
}

// FuzzCompute feeds the planner members with odd Services and slices: it
// must never panic, and what it plans must be writable.
func FuzzCompute(f *testing.F) {
	f.Add("foo", uint8(3), []byte{1, 2, 3, 4, 5, 6, 7, 8}, "10.0.0.1", "http", int32(80), true)
	f.Add("a", uint8(0), []byte{}, "", "", int32(0), false)
	f.Add("x-y", uint8(255), []byte{255, 0, 255, 0}, "fd00::1", "UDP", int32(65536), true)
	f.Fuzz(func(t *testing.T, name string, nMembers uint8, shape []byte, addr, portName string, number int32, withMCS bool) {
		in := &Input{Namespace: "ns", Name: name, Members: map[string]Member{}}
		for i := range int(nMembers % 5) {
			b := func(k int) byte {
				if len(shape) == 0 {
					return 0
				}
				return shape[(i*4+k)%len(shape)]
			}
			m := Member{Known: b(0)%4 != 0, Stale: b(1)%2 == 1}
			if b(1)%3 != 0 {
				// Names from a small set, so that providers share, differ
				// in, or leave out a port's name.
				names := []string{"", portName, "http"}
				m.Service = svc(b(1)%2 == 0, port(names[b(2)%3], number+int32(b(2)%4), corev1.Protocol(portName)))
				if b(0)%2 == 0 {
					m.Service.Spec.Ports = append(m.Service.Spec.Ports, port(names[(b(2)+1)%3], number+int32(b(3)%4), corev1.ProtocolUDP))
				}
			}
			if b(2)%2 == 0 {
				m.Export = exportAt(int(b(3)))
			}
			for j := range int(b(3) % 4) {
				s := slice(fmt.Sprintf("%s-%d", name, j), addr)
				s.AddressType = []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}[j%3]
				m.Slices = append(m.Slices, s)
			}
			in.Members[fmt.Sprintf("m%d", i)] = m
		}
		if withMCS {
			in.MCS = multi(api.Strategy(portName), nil, nil)
		}
		p := Compute(in)
		if p.Invalid != "" || p.Unexportable != nil {
			return
		}
		if p.Import != nil {
			if err := validServicePorts(p.Import.Ports); err != "" {
				t.Errorf("ports %+v would make a derived Service the API server refuses: %s", p.Import.Ports, err)
			}
		}
		seen := map[string]bool{}
		for _, s := range p.Slices {
			if seen[s.Name] {
				t.Errorf("two imported slices named %s", s.Name)
			}
			seen[s.Name] = true
			if errs := validation.IsDNS1123Subdomain(s.Name); len(errs) > 0 {
				t.Errorf("imported slice name %q: %v", s.Name, errs)
			}
			if s.AddressType == discoveryv1.AddressTypeFQDN {
				t.Errorf("FQDN slice %s planned", s.Name)
			}
		}
		if p.Import != nil && len(p.Import.Clusters) == 0 {
			t.Errorf("an import without clusters: %+v", p.Import)
		}
		// Staleness never takes a service's last ready endpoint.
		sourceReady, importedReady := false, false
		var importedFrom []string
		if p.Import != nil {
			importedFrom = p.Import.Clusters
		}
		for _, c := range importedFrom {
			for _, s := range in.Members[c].Slices {
				sourceReady = sourceReady || (s.AddressType != discoveryv1.AddressTypeFQDN && slices.ContainsFunc(s.Endpoints, ready))
			}
		}
		for _, s := range p.Slices {
			importedReady = importedReady || slices.ContainsFunc(s.Endpoints, ready)
		}
		if sourceReady && !importedReady {
			t.Errorf("the providers have ready endpoints, the imported slices none (stale: %v)", p.Stale)
		}
		for _, c := range p.Provision {
			if _, ok := in.Members[c]; !ok {
				t.Errorf("provision cluster %s is not a member", c)
			}
		}
	})
}

// The derived Service follows the providers' IP families: one family is
// that family, single-stack; both families between them is dual-stack
// with the consumer's own families; none stated is the consumer's default.
func TestFamilies(t *testing.T) {
	v4, v6 := corev1.IPv4Protocol, corev1.IPv6Protocol
	for _, tc := range []struct {
		name     string
		m1, m2   []corev1.IPFamily
		headless bool
		policy   corev1.IPFamilyPolicy
		want     []corev1.IPFamily
		conflict bool // m2's families differ from m1's: IPFamilyConflict
	}{
		{"unstated", nil, nil, false, "", nil, false},
		{"IPv4", []corev1.IPFamily{v4}, []corev1.IPFamily{v4}, false, corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{v4}, false},
		{"IPv6, the other unstated", []corev1.IPFamily{v6}, nil, false, corev1.IPFamilyPolicySingleStack, []corev1.IPFamily{v6}, false},
		{"dual-stack both, in either order", []corev1.IPFamily{v6, v4}, []corev1.IPFamily{v4, v6}, false, corev1.IPFamilyPolicyPreferDualStack, nil, false},
		{"dual-stack and IPv4", []corev1.IPFamily{v6, v4}, []corev1.IPFamily{v4}, false, corev1.IPFamilyPolicyPreferDualStack, nil, true},
		{"one of each", []corev1.IPFamily{v4}, []corev1.IPFamily{v6}, false, corev1.IPFamilyPolicyPreferDualStack, nil, true},
		{"headless", []corev1.IPFamily{v6}, []corev1.IPFamily{v6}, true, "", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s1, s2 := svc(tc.headless, port("http", 80, "")), svc(tc.headless, port("http", 80, ""))
			s1.Spec.IPFamilies, s2.Spec.IPFamilies = tc.m1, tc.m2
			p := Compute(&Input{Name: "foo", Members: map[string]Member{
				"m1": {Known: true, Service: s1, Export: exportAt(0)},
				"m2": {Known: true, Service: s2, Export: exportAt(1)},
			}})
			if p.Import == nil {
				t.Fatal("no import")
			}
			if got := ptr.Deref(p.Import.IPFamilyPolicy, ""); got != tc.policy || !slices.Equal(p.Import.IPFamilies, tc.want) {
				t.Errorf("policy %q families %v, want %q %v", got, p.Import.IPFamilies, tc.policy, tc.want)
			}
			if c, ok := p.Conflicts["m2"]; ok != tc.conflict || (ok && c.Reason != mcsv1b1.ServiceExportReasonIPFamilyConflict) {
				t.Errorf("m2's conflict %+v, want IPFamilyConflict: %v", c, tc.conflict)
			}
		})
	}
}

// A spec that names a cluster that left is followed without it: a list
// of only such clusters names none (not every member), and each list says
// which left. A name that was never a member is still a typo.
func TestLeft(t *testing.T) {
	members := map[string]Member{
		"m1": {Known: true, Service: svc(false, port("http", 80, "")), Slices: []*discoveryv1.EndpointSlice{slice("foo-a", "10.0.0.1")}},
		"m2": {Known: true},
	}
	p := Compute(&Input{Namespace: "ns", Name: "foo", Members: members, Left: []string{"m3"},
		MCS: multi("", []v1alpha1.ClusterName{"m1", "m3"}, []v1alpha1.ClusterName{"m2", "m3"})})
	if p.Invalid != "" || !slices.Equal(p.Provision, []string{"m1"}) || !slices.Equal(p.Consumption, []string{"m2"}) ||
		!slices.Equal(p.LeftProvision, []string{"m3"}) || !slices.Equal(p.LeftConsumption, []string{"m3"}) {
		t.Errorf("plan %q provision %v (left %v) consumption %v (left %v)", p.Invalid, p.Provision, p.LeftProvision, p.Consumption, p.LeftConsumption)
	}
	p = Compute(&Input{Namespace: "ns", Name: "foo", Members: members, Left: []string{"m3"},
		MCS: multi("", []v1alpha1.ClusterName{"m1"}, []v1alpha1.ClusterName{"m3"})})
	if len(p.Consumption) != 0 || p.Consumes("m1") || p.Consumes("m2") {
		t.Errorf("only a departed consumer: consumption %v, want none", p.Consumption)
	}
	p = Compute(&Input{Namespace: "ns", Name: "foo", Members: members, Left: []string{"m3"},
		MCS: multi("", nil, []v1alpha1.ClusterName{"m2", "m4"})})
	if !strings.Contains(p.Invalid, `unknown cluster "m4"`) {
		t.Errorf("a cluster never registered: %q, want it invalid", p.Invalid)
	}
}

// localFirst is a MultiClusterService of strategy with spec.localFirst.
func localFirst(strategy api.Strategy, order []v1alpha1.ClusterName, minReady *int32) *v1alpha1.MultiClusterService {
	m := multi(strategy, nil, nil)
	m.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{MinReadyEndpoints: minReady, FailoverOrder: order}
	return m
}

// LocalFirst's policy goes onto the import as annotations, only what is
// set: without it the annotations are today's, the strategy alone. A
// failover cluster must be a provision cluster when they are listed.
func TestLocalFirstPolicy(t *testing.T) {
	members := map[string]Member{"m1": {Known: true, Service: svc(false)}, "m2": {Known: true}, "m3": {Known: true, Service: svc(false)}}
	for _, tc := range []struct {
		name string
		mcs  *v1alpha1.MultiClusterService
		want map[string]string
	}{
		{"none", multi(api.LocalFirst, nil, nil), map[string]string{api.AnnotationStrategy: "LocalFirst"}},
		{"minimum", localFirst(api.LocalFirst, nil, ptr.To[int32](2)), map[string]string{api.AnnotationStrategy: "LocalFirst", api.AnnotationMinReadyEndpoints: "2"}},
		{"order", localFirst(api.LocalFirst, []v1alpha1.ClusterName{"m3", "m1"}, nil), map[string]string{api.AnnotationStrategy: "LocalFirst", api.AnnotationFailoverOrder: "m3,m1"}},
	} {
		p := Compute(&Input{Name: "foo", Members: members, MCS: tc.mcs})
		if p.Invalid != "" || !maps.Equal(p.Native, tc.want) {
			t.Errorf("%s: native %v (invalid %q), want %v", tc.name, p.Native, p.Invalid, tc.want)
		}
	}
	m := localFirst(api.LocalFirst, []v1alpha1.ClusterName{"m3"}, nil)
	m.Spec.ServiceProvisionClusters = []v1alpha1.ClusterName{"m1"}
	if p := Compute(&Input{Name: "foo", Members: members, MCS: m}); !strings.Contains(p.Invalid, `spec.localFirst.failoverOrder: "m3" is not in spec.serviceProvisionClusters`) {
		t.Errorf("failover to a cluster that does not provide: %q", p.Invalid)
	}
}

// The endpoints imported from one provider are bounded: past the bound the
// rest is left out, and Skipped says how many, for the conditions. The
// other provider's are not cut by the first's.
func TestMaxEndpointsPerCluster(t *testing.T) {
	in := &Input{Name: "foo", MaxEndpoints: 3, Members: map[string]Member{
		"a": {Known: true, Export: exportAt(0), Service: svc(false), Slices: []*discoveryv1.EndpointSlice{
			slice("a1", "10.0.0.1", "10.0.0.2"), slice("a2", "10.0.0.3", "10.0.0.4"), slice("a3", "10.0.0.5"),
		}},
		"b": {Known: true, Export: exportAt(1), Service: svc(false), Slices: []*discoveryv1.EndpointSlice{slice("b1", "10.0.1.1", "10.0.1.2")}},
	}}
	p := Compute(in)
	got := map[string][]string{}
	for _, s := range p.Slices {
		for _, e := range s.Endpoints {
			got[s.Name] = append(got[s.Name], e.Addresses[0])
		}
	}
	want := map[string][]string{
		"imported-a-a1": {"10.0.0.1", "10.0.0.2"}, "imported-a-a2": {"10.0.0.3"}, "imported-b-b1": {"10.0.1.1", "10.0.1.2"},
	}
	if !maps.EqualFunc(got, want, slices.Equal) || len(p.Slices) != 3 {
		t.Errorf("imported %v, want %v", got, want)
	}
	if !slices.ContainsFunc(p.Skipped, func(s string) bool { return strings.HasPrefix(s, "a: 2 endpoints left out") }) {
		t.Errorf("skipped %q, want a's 2 endpoints left out", p.Skipped)
	}
}

// A MultiClusterService's provision list is authoritative: a member it
// does not name provides nothing, ServiceExport or not, and is told why.
func TestProvisionListAuthoritative(t *testing.T) {
	in := &Input{Namespace: "ns", Name: "foo", MCS: multi("", []v1alpha1.ClusterName{"m1"}, nil), Members: map[string]Member{
		"m1": {Known: true, Service: svc(false, port("http", 80, "")), Export: exportAt(1), Slices: []*discoveryv1.EndpointSlice{slice("foo-a", "10.0.0.1")}},
		"m3": {Known: true, Service: svc(false, port("http", 80, "")), Export: exportAt(0), Slices: []*discoveryv1.EndpointSlice{slice("foo-c", "10.0.0.3")}},
	}}
	p := Compute(in)
	if !slices.Equal(p.Provision, []string{"m1"}) || len(p.Slices) != 1 || p.Slices[0].Labels[mcsv1b1.LabelSourceCluster] != "m1" {
		t.Errorf("provision %v, slices %d, want m1's alone", p.Provision, len(p.Slices))
	}
	if c := p.NotAllowed["m3"]; c.Reason != ReasonNotProvisionCluster || !strings.Contains(c.Message, "spec.serviceProvisionClusters") {
		t.Errorf("m3: %+v, want %s", c, ReasonNotProvisionCluster)
	}
	in.MCS = multi("", nil, nil) // no list: every member with the Service provides
	if p := Compute(in); !slices.Equal(p.Provision, []string{"m1", "m3"}) || len(p.NotAllowed) != 0 {
		t.Errorf("no list: provision %v, not allowed %v", p.Provision, p.NotAllowed)
	}
}

// An imported slice keeps the ports its cluster's Service defines as the
// import does: a slice port carries the target port under the Service
// port's name, so a losing definition of a name would otherwise get the
// winner's traffic through kube-proxy.
func TestImportedSlicesExposeTheImportsPorts(t *testing.T) {
	// Ports are "name/number/protocol", space-separated; "-" is unnamed,
	// a protocol left out is none (TCP). wantOld "=": oldSlice, whole.
	for _, tc := range []struct {
		name                                               string
		headless                                           bool
		old, newer, oldSlice, newSlice, wantOld, wantNewer string
	}{
		{"same name, another number: dropped", false, "tcp/42/TCP udp/42/UDP", "tcp/4242/TCP", "tcp/42/TCP udp/42/UDP", "tcp/42/TCP", "=", ""},
		{"another name, another number: kept", false, "tcp/42/TCP udp/42/UDP", "tcp2/4242/TCP", "tcp/42/TCP udp/42/UDP", "tcp2/42/TCP", "=", "tcp2/42/TCP"},
		{"the same definition, another target port: kept", false, "http/80", "http/80/TCP", "http/8080", "http/9090/TCP", "=", "http/9090/TCP"},
		{"unnamed, another number: dropped", false, "-/80/TCP", "-/8080/TCP", "-/80/TCP", "-/80/TCP", "=", ""},
		{"one of two ports lost: the other kept", false, "a/1/TCP b/2/TCP", "a/11/TCP b/2/TCP", "a/1/TCP b/2/TCP", "a/1/TCP b/2/TCP", "=", "b/2/TCP"},
		{"a slice port its Service does not name, or of another protocol: dropped", false, "dns/53/UDP", "dns/53/UDP", "dns/53/UDP stale/1/TCP dns/53/TCP", "dns/53/UDP", "dns/53/UDP", "dns/53/UDP"},
		{"headless: the same", true, "tcp/42/TCP", "tcp/4242/TCP", "tcp/42/TCP", "tcp/42/TCP", "=", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			member := func(minutes int, ports, slicePorts, addr string) Member {
				s := svc(tc.headless)
				for _, p := range parsePorts(ports) {
					s.Spec.Ports = append(s.Spec.Ports, port(*p.Name, *p.Port, ptr.Deref(p.Protocol, "")))
				}
				sl := slice(addr, addr)
				sl.Ports = parsePorts(slicePorts)
				return Member{Known: true, Export: exportAt(minutes), Service: s, Slices: []*discoveryv1.EndpointSlice{sl}}
			}
			p := Compute(&Input{Namespace: "ns", Name: "foo", Members: map[string]Member{
				"old": member(0, tc.old, tc.oldSlice, "10.0.0.1"), "newer": member(1, tc.newer, tc.newSlice, "10.0.0.2"),
			}})
			got := map[string]*discoveryv1.EndpointSlice{}
			for _, s := range p.Slices {
				got[s.Labels[mcsv1b1.LabelSourceCluster]] = s
			}
			if tc.wantOld == "=" {
				tc.wantOld = tc.oldSlice
			}
			for c, want := range map[string]string{"old": tc.wantOld, "newer": tc.wantNewer} {
				s := got[c]
				if s == nil {
					t.Fatalf("no slice imported from %s", c)
				}
				if !equality.Semantic.DeepEqual(s.Ports, parsePorts(want)) {
					t.Errorf("%s's imported ports %s, want %s", c, portsOf(s.Ports), want)
				}
				if len(s.Endpoints) != 1 {
					t.Errorf("%s's imported endpoints %+v, want its one kept", c, s.Endpoints)
				}
			}
		})
	}
}

// parsePorts makes slice ports of "name/number/protocol …" ("-": unnamed;
// no protocol: none).
func parsePorts(ports string) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, f := range strings.Fields(ports) {
		parts := strings.Split(f+"//", "/")
		n, _ := strconv.Atoi(parts[1])
		p := discoveryv1.EndpointPort{Name: ptr.To(strings.TrimPrefix(parts[0], "-")), Port: ptr.To(int32(n))}
		if parts[2] != "" {
			p.Protocol = ptr.To(corev1.Protocol(parts[2]))
		}
		out = append(out, p)
	}
	return out
}

func portsOf(ps []discoveryv1.EndpointPort) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%s/%d/%s", cmp.Or(ptr.Deref(p.Name, ""), "-"), ptr.Deref(p.Port, 0), ptr.Deref(p.Protocol, "")))
	}
	return strings.Join(out, " ")
}

// Provider Services are planned for an order's providers that have the
// Service, in its order; none for a headless import or without an order.
func TestProvidersPlanned(t *testing.T) {
	in := func(headless bool, order ...v1alpha1.ClusterName) *Input {
		m := multi(api.LocalFirst, []v1alpha1.ClusterName{"m1", "m2", "m3"}, []v1alpha1.ClusterName{"m4"})
		if order != nil {
			m.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{FailoverOrder: order}
		}
		return &Input{Namespace: "ns", Name: "foo", MCS: m, Members: map[string]Member{
			"m1": {Known: true, Service: svc(headless, port("http", 80, "")), Slices: []*discoveryv1.EndpointSlice{slice("foo-a", "10.0.0.1")}},
			"m2": {Known: true}, // named, no Service
			"m3": {Known: true, Service: svc(headless, port("http", 80, "")), Slices: []*discoveryv1.EndpointSlice{slice("foo-c", "10.0.0.3")}},
			"m4": {Known: true},
		}}
	}
	p := Compute(in(false, "m3", "m2", "m1"))
	if !slices.Equal(p.Providers, []string{"m3", "m1"}) {
		t.Errorf("providers %v, want [m3 m1]", p.Providers)
	}
	var names []string
	for _, s := range p.Slices {
		names = append(names, s.Name+"→"+s.Labels[discoveryv1.LabelServiceName])
	}
	want := []string{
		"imported-m1-foo-a→derived-foo", "imported-m3-foo-c→derived-foo",
		"imported-p.imported-m1-foo-a→" + api.ProviderService("foo", "m1"), "imported-p.imported-m3-foo-c→" + api.ProviderService("foo", "m3"),
	}
	if !slices.Equal(names, want) {
		t.Errorf("slices %v, want %v", names, want)
	}
	for what, p := range map[string]*Plan{"headless": Compute(in(true, "m3")), "no order": Compute(in(false))} {
		if len(p.Providers) != 0 || len(p.Slices) != 2 {
			t.Errorf("%s: providers %v, %d slices; want none and the 2 imported", what, p.Providers, len(p.Slices))
		}
	}
}
