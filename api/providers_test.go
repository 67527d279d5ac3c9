package api

import (
	"maps"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// A provider Service's name is a Service name whatever the service and
// cluster, is no derived-<svc>, and differs for every pair.
func TestProviderServiceNames(t *testing.T) {
	long := strings.Repeat("a", 55) // the longest name that has a derived-<svc>
	seen := map[string]string{}
	for _, pair := range [][2]string{{"foo", "member1"}, {"foo", "member3"}, {"foo-member1", "x"}, {"foo", "member1-x"}, {long, strings.Repeat("c", 63)}} {
		name := ProviderService(pair[0], pair[1])
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Errorf("%v: %q is not a Service name: %v", pair, name, errs)
		}
		if !IsProviderService(name) {
			t.Errorf("%v: %q is not shaped as a provider Service's", pair, name)
		}
		svc := strings.TrimPrefix(name, DerivedPrefix)
		if len(validation.IsDNS1035Label(svc)) == 0 {
			t.Errorf("%v: %q is derived-%s", pair, name, svc)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("%v and %s have one name %q", pair, other, name)
		}
		seen[name] = pair[0] + "/" + pair[1]
	}
	if IsProviderService(DerivedPrefix+"foo") || IsProviderService(DerivedPrefix+"0") {
		t.Error("a derived-<svc> name, or a short one, taken for a provider Service's")
	}
}

func TestProviderVIPsRoundTrip(t *testing.T) {
	ips := map[string][]string{"member3": {"10.96.0.3", "fd00::3"}, "member1": {"10.96.0.1"}}
	v := FormatProviderVIPs([]string{"member3", "member2", "member1"}, ips)
	if v != "member3=10.96.0.3;fd00::3,member1=10.96.0.1" {
		t.Errorf("formatted %q", v)
	}
	if got := ParseProviderVIPs(v); !maps.EqualFunc(got, ips, func(a, b []string) bool { return strings.Join(a, " ") == strings.Join(b, " ") }) {
		t.Errorf("parsed %v, want %v", got, ips)
	}
	if got := ParseProviderVIPs("=1.2.3.4,member1=,nonsense"); len(got) != 0 {
		t.Errorf("parsed %v from nonsense, want nothing", got)
	}
}
