package mcs

import (
	"net"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/plugin/mcs/decide"
)

// choice is what one native query is answered with: virtual IPs (and the
// ports that go with them) or the endpoints of some slices.
type choice struct {
	outcome  outcome
	fellBack bool // LocalFirst answered remote: fewer local endpoints than its minimum are ready
	vips     []net.IP
	ports    portList
	slices   []*endpointSlice
}

// choose answers a cluster.local name by the decision table (package
// decide, README.md "Native names: the decision"); host is set for a
// per-endpoint name. ok is false when mcs has nothing to answer with: the
// query then goes to the next plugin, which answers as it would for an
// endpoint-less service. split gives the candidates; it is called only
// when the choice depends on them (not decide.Fixed), since it looks up
// every remote slice's cluster among the Leases.
func choose(v *view, mode answerMode, host bool, split func() candidates) (c choice, ok bool) {
	// Field by field, not a literal: the compiler builds a literal aside and
	// copies it in, a wide load of bytes just stored that stalls the query.
	var r decide.Rules
	r.LocalFirst, r.AnswerVIP, r.Headless = v.strategy == api.LocalFirst, mode == answerVIP, v.headless()
	r.LocalVIP, r.SetVIP, r.MinReady, r.Remapped = v.hasLocalVIP(), v.hasSetVIP(), v.imp.policy.MinReady, v.remapped
	var s candidates
	a, fixed := decide.Fixed(&r)
	switch {
	case host:
		s = split()
		a = decide.Endpoint(&r, endpointsOf(s))
	case !fixed:
		s = split()
		a = decide.Service(&r, endpointsOf(s))
	}
	c = choice{outcome: outcomeOf(r.LocalFirst, a.Set), fellBack: a.FellBack}
	switch a.Set {
	case decide.None:
		return choice{}, false
	case decide.LocalVIP:
		c.vips, c.ports = v.svc.ips, v.svc.ports
	case decide.SetVIP:
		c.vips, c.ports = v.imp.ips, v.imp.ports
		if !a.FellBack {
			break // RemoteAndLocal's VIP_set, every query of it: no provider to pick
		}
		if vips := v.imp.providerVIP(s); vips != nil {
			c.vips = vips
		}
	case decide.Local:
		c.slices = s.local
	case decide.LocalAndFresh:
		c.slices = s.union
	case decide.Fresh:
		c.slices = s.fresh
	case decide.Stale:
		c.slices = s.stale
	}
	if a.Failover {
		c.slices = decide.Preferred(c.slices, v.imp.policy.Order, clusterOf)
	}
	return c, true
}

// hasProtocol reports whether c answers SRV names of a named port that
// speaks proto: _<proto>.<svc>… then has names below it.
func (c choice) hasProtocol(proto string) bool {
	if c.vips != nil {
		return hasNamedProtocol(c.ports.all(), proto)
	}
	for _, s := range c.slices {
		if hasNamedProtocol(s.ports.all(), proto) {
			return true
		}
	}
	return false
}

// endpointsOf is what the table needs to know of a query's candidates.
func endpointsOf(s candidates) decide.Endpoints {
	return decide.Endpoints{Local: readyCount(s.local), Fresh: len(s.fresh) > 0, Stale: len(s.stale) > 0}
}

// outcomeOf labels the requests metric: the local sets are local;
// LocalFirst's others remote, RemoteAndLocal's combined.
func outcomeOf(localFirst bool, set decide.Set) outcome {
	switch {
	case set == decide.Local || set == decide.LocalVIP:
		return outcomeLocal
	case localFirst:
		return outcomeRemote
	}
	return outcomeCombined
}

// readyCount is how many ready endpoints ss hold (a slice lists its ready
// ones only).
func readyCount(ss []*endpointSlice) int {
	n := 0
	for _, s := range ss {
		n += s.count()
	}
	return n
}

func clusterOf(s *endpointSlice) string { return s.cluster }

// providerVIP is the VIP of the provider decide.FirstListed picks of s,
// once the controller has made its provider Service: kube-proxy routes it
// to that provider alone. Nil without an order, when no ordered provider
// has ready endpoints, or before that provider's Service has its VIP.
func (imp *serviceImport) providerVIP(s candidates) []net.IP {
	if len(imp.providerVIPs) == 0 {
		return nil
	}
	return imp.providerVIPs[decide.FirstListed(s.fresh, s.stale, imp.policy.Order, clusterOf)]
}
