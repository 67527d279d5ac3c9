package mcs

import (
	"net"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// choice is what one native query is answered with: virtual IPs (and the
// ports that go with them) or the endpoints of some slices.
type choice struct {
	outcome  outcome
	fellBack bool // LocalFirst answered remote because no local endpoint is ready
	vips     []net.IP
	ports    []port
	slices   []*endpointSlice
}

// decide is the decision table for a cluster.local name (README.md,
// "Native names: the decision"). ok is false
// when mcs has nothing to answer with: the query then goes to the next plugin,
// which answers as it would for an endpoint-less service. split gives the
// candidates; it is called only when the choice depends on them, since it
// looks up every remote slice's cluster among the Leases.
func decide(v *view, mode answerMode, split func() candidates) (c choice, ok bool) {
	useVIP := mode == answerVIP && !v.headless()
	if v.strategy == api.LocalFirst {
		return localFirst(v, useVIP, split())
	}
	return remoteAndLocal(v, useVIP, split)
}

func localFirst(v *view, useVIP bool, s candidates) (choice, bool) {
	if len(s.local) > 0 {
		if useVIP && v.hasLocalVIP() {
			return choice{outcome: outcomeLocal, vips: v.svc.ips, ports: v.svc.ports}, true
		}
		return choice{outcome: outcomeLocal, slices: s.local}, true
	}
	if remote := firstNonEmpty(s.fresh, s.stale); len(remote) > 0 {
		if useVIP && v.hasSetVIP() {
			return choice{outcome: outcomeRemote, fellBack: true, vips: v.imp.ips, ports: v.imp.ports}, true
		}
		return choice{outcome: outcomeRemote, fellBack: true, slices: remote}, true
	}
	switch {
	case !useVIP:
		return choice{}, false
	case v.hasLocalVIP():
		return choice{outcome: outcomeLocal, vips: v.svc.ips, ports: v.svc.ports}, true
	case v.hasSetVIP():
		return choice{outcome: outcomeRemote, vips: v.imp.ips, ports: v.imp.ports}, true
	}
	return choice{}, false
}

func remoteAndLocal(v *view, useVIP bool, split func() candidates) (choice, bool) {
	if useVIP && v.hasSetVIP() {
		return choice{outcome: outcomeCombined, vips: v.imp.ips, ports: v.imp.ports}, true
	}
	s := split()
	if all := firstNonEmpty(s.union, s.stale); len(all) > 0 {
		return choice{outcome: outcomeCombined, slices: all}, true
	}
	return choice{}, false
}
