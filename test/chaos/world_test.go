package chaos

import (
	"slices"
	"testing"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The world has what issue 47 asks of it: services exported both ways,
// both strategies, a headless one of each way, LocalFirst with a minimum
// and an order, and consumers that provide too.
func TestWorld(t *testing.T) {
	w := NewWorld(20)
	count := map[string]int{}
	for _, s := range w.Services {
		switch {
		case !s.MCS:
			count["ServiceExport"]++
		case s.Strategy == api.RemoteAndLocal:
			count["RemoteAndLocal"]++
		default:
			count["LocalFirst"]++
		}
		if s.Headless && s.MCS {
			count["headless MCS"]++
		}
		if s.Headless && !s.MCS {
			count["headless export"]++
		}
		if s.LocalFirstPolicy {
			count["policy"]++
			// The order names member3 and member1: both must provide.
			if s.Strategy != api.LocalFirst || !slices.Contains(s.Providers, member3) || !slices.Contains(s.Providers, member1) {
				t.Errorf("%s: a LocalFirst policy needs strategy LocalFirst and member1 and member3 providing: %+v", s.Name, s)
			}
		}
		if len(s.Providers) == 0 || len(s.Consumers) == 0 {
			t.Errorf("%s has no provider or no consumer", s.Name)
		}
	}
	want := map[string]int{"ServiceExport": 6, "RemoteAndLocal": 7, "LocalFirst": 7, "headless MCS": 1, "headless export": 1, "policy": 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d services of %s, want %d (%v)", count[k], k, n, count)
		}
	}
}
