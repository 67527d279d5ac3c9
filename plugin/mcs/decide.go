package mcs

import "net"

type strategy string

const (
	strategyRemoteAndLocal strategy = "RemoteAndLocal"
	strategyLocalFirst     strategy = "LocalFirst"
)

func parseStrategyValue(s string) (strategy, bool) {
	switch strategy(s) {
	case strategyRemoteAndLocal, strategyLocalFirst:
		return strategy(s), true
	}
	return "", false
}

type answerMode string

const (
	answerVIP       answerMode = "vip"
	answerEndpoints answerMode = "endpoints"
)

// outcome labels the requests metric: which set an answer came from.
type outcome string

const (
	outcomeLocal    outcome = "local"
	outcomeRemote   outcome = "remote"
	outcomeCombined outcome = "combined"
	outcomeNXDomain outcome = "nxdomain"
	outcomeServfail outcome = "servfail"
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

// decide is SPEC §5's decision table for a cluster.local name. ok is false
// when mcs has nothing to answer with: the query then goes to the next plugin,
// which answers as it would for an endpoint-less service.
func decide(v *view, mode answerMode, s sets) (c choice, ok bool) {
	useVIP := mode == answerVIP && !v.headless()
	if v.strategy == strategyLocalFirst {
		return localFirst(v, useVIP, s)
	}
	return remoteAndLocal(v, useVIP, s)
}

func localFirst(v *view, useVIP bool, s sets) (choice, bool) {
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

func remoteAndLocal(v *view, useVIP bool, s sets) (choice, bool) {
	if useVIP && v.hasSetVIP() {
		return choice{outcome: outcomeCombined, vips: v.imp.ips, ports: v.imp.ports}, true
	}
	if all := firstNonEmpty(s.union, s.stale); len(all) > 0 {
		return choice{outcome: outcomeCombined, slices: all}, true
	}
	return choice{}, false
}

func (v *view) hasLocalVIP() bool { return v.svc != nil && len(v.svc.ips) > 0 }
func (v *view) hasSetVIP() bool   { return v.imp != nil && len(v.imp.ips) > 0 }
