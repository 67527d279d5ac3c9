package controller

import (
	"fmt"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// compressible is a slice of n endpoints alike, which the caches pack
// into a few hundred bytes but every read decodes whole.
func compressible(name string, n int) *discoveryv1.EndpointSlice {
	s := slice("junk", name, 1)
	s.Namespace = "junk"
	s.Labels[discoveryv1.LabelManagedBy] = api.ManagedBy
	for range n {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.9.0.1"}, Hostname: ptr.To("same-host-name-every-time")})
	}
	return s
}

// What a member's objects take is counted as decoded, not as packed: 40
// slices that pack into a few KiB but decode to 1.5 MiB pass a bound of
// 1 MiB, and one slice of 2.5 MiB decoded passes what one object may take.
func TestMemberBytesCountedDecoded(t *testing.T) {
	var many []runtime.Object
	for i := range 40 {
		many = append(many, compressible(fmt.Sprintf("junk%d", i), 1000))
	}
	for _, c := range []struct {
		name string
		objs []runtime.Object
		opts []option
		want string
	}{
		{"many", many, []option{withMaxBytes(1 << 20)}, "member1 holds objects that take more than 1 MiB held, as decoded"},
		{"one", []runtime.Object{compressible("junk", 80000)}, nil, "member1 holds an object, junk/junk, that takes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, world{m1: append([]runtime.Object{ns1()}, c.objs...), m2: {ns1()}}, c.opts...)
			if ok, err := f.member(m1).Reachable(); ok || err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("member1 reachable %v (%v), want unreachable, saying %q", ok, err, c.want)
			}
			if ok, err := f.member(m2).Reachable(); !ok {
				t.Fatalf("member2, within the bound, is unreachable: %v", err)
			}
		})
	}
}
