package mcs

import (
	"cmp"
	"net"
	"slices"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// choice is what one native query is answered with: virtual IPs (and the
// ports that go with them) or the endpoints of some slices.
type choice struct {
	outcome  outcome
	fellBack bool // LocalFirst answered remote because no local endpoint is ready
	vips     []net.IP
	ports    portList
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

// own decides a per-endpoint name (web-0.web.ns.svc.cluster.local): a
// ready local endpoint of that name is the one answered, whatever the
// strategy and the import's minimum, so that no other cluster's pod can
// take a local pod's name; else the table decides among the others.
func own(v *view, mode answerMode, s candidates) (choice, bool) {
	if len(s.local) > 0 {
		return choice{outcome: outcomeLocal, slices: s.local}, true
	}
	return decide(v, mode, func() candidates { return s })
}

// localFirst answers this cluster's endpoints while it has enough ready
// ones (the import's minimum, 1 by default), else the remote ones: fresh
// ones, and of those the first cluster of the failover order that has
// any, else the unlisted ones together. Below the minimum with no fresh
// remote one, the local ones still answer; stale ones only when there is
// no local one either (a stale cluster is used only when nothing else is
// left).
func localFirst(v *view, useVIP bool, s candidates) (choice, bool) {
	local := func() (choice, bool) {
		if useVIP && v.hasLocalVIP() {
			return choice{outcome: outcomeLocal, vips: v.svc.ips, ports: v.svc.ports}, true
		}
		return choice{outcome: outcomeLocal, slices: s.local}, true
	}
	if len(s.local) > 0 && readyCount(s.local) >= v.minReady() {
		return local()
	}
	remote := s.fresh
	if len(s.local) == 0 {
		remote = firstNonEmpty(s.fresh, s.stale)
	}
	if len(remote) > 0 {
		if useVIP && v.hasSetVIP() {
			return choice{outcome: outcomeRemote, fellBack: true, vips: v.imp.ips, ports: v.imp.ports}, true
		}
		return choice{outcome: outcomeRemote, fellBack: true, slices: preferred(remote, v.imp.failover)}, true
	}
	if len(s.local) > 0 {
		return local()
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

// readyCount is how many ready endpoints ss hold (a slice lists its ready
// ones only).
func readyCount(ss []*endpointSlice) int {
	n := 0
	for _, s := range ss {
		n += s.count()
	}
	return n
}

// preferred is the slices of the first cluster in order that has any, else
// those of the clusters order does not name. ss is sorted by cluster.
func preferred(ss []*endpointSlice, order []string) []*endpointSlice {
	if len(order) == 0 {
		return ss
	}
	for _, c := range order {
		if of := ofCluster(ss, c); len(of) > 0 {
			return of
		}
	}
	var rest []*endpointSlice
	for _, s := range ss {
		if !slices.Contains(order, s.cluster) {
			rest = append(rest, s)
		}
	}
	return rest
}

// ofCluster is the run of ss (sorted by cluster) from cluster c.
func ofCluster(ss []*endpointSlice, c string) []*endpointSlice {
	i, _ := slices.BinarySearchFunc(ss, c, func(s *endpointSlice, c string) int { return cmp.Compare(s.cluster, c) })
	j := i
	for j < len(ss) && ss[j].cluster == c {
		j++
	}
	return ss[i:j]
}
