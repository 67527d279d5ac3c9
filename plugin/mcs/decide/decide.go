// Package decide is the decision table of the native cluster.local names
// (plugin/mcs/README.md, "Native names: the decision"): which of a
// service's sets of addresses answers a query, given its strategy, what it
// has of virtual IPs, and where its ready endpoints are. The mcs plugin
// answers by it and `kubectl mcs diagnose --dns` predicts the plugin's
// answers by it, so the two cannot disagree.
//
// It is pure and allocates nothing: the plugin calls it on every native
// query.
package decide

import (
	"strconv"
	"strings"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Rules are what a service's answer depends on besides its endpoints. The
// functions take them by pointer: the plugin builds them per query, and a
// copy of freshly written bytes costs the query a stall.
type Rules struct {
	LocalFirst bool // the strategy is LocalFirst, else RemoteAndLocal
	AnswerVIP  bool // the answer option is vip
	Headless   bool // the ServiceImport is headless: endpoints, whatever the answer option
	LocalVIP   bool // the local Service has ClusterIPs (VIP_local)
	SetVIP     bool // the ServiceImport has spec.ips (VIP_set)
	MinReady   int  // LocalFirst's minimum (Policy)
	// Remapped: a ready endpoint of the ClusterIP service listens on
	// another number than the service's port it stands for (Remapped), so
	// no pod address answers the service's name, whatever the answer
	// option: a client would connect to the service's number.
	Remapped bool
}

// Port is a service's or an endpoint's port.
type Port struct {
	Name, Protocol string // the protocol "" is TCP, as the API server defaults it
	Number         int32
}

// Remapped reports whether the endpoint port p stands for a port of the
// service (the same name and protocol) under another number: the
// Service's targetPort is not its port, and kube-proxy translates between
// them for the VIP alone.
func Remapped(service []Port, p Port) bool {
	for _, s := range service {
		if strings.EqualFold(s.Name, p.Name) && strings.EqualFold(tcpOr(s.Protocol), tcpOr(p.Protocol)) {
			return s.Number != p.Number
		}
	}
	return false
}

func tcpOr(protocol string) string {
	if protocol == "" {
		return "TCP"
	}
	return protocol
}

// Policy is LocalFirst's policy, from the ServiceImport's annotations.
type Policy struct {
	MinReady int      // the fewest ready local endpoints that answer; below 1 means 1
	Order    []string // the failover order among the providers
}

// PolicyOf reads the policy annotations. A value that does not parse is
// left out, so that its default applies: a minimum of 1, no order.
func PolicyOf(annotations map[string]string) Policy {
	var p Policy
	if n, err := strconv.Atoi(annotations[api.AnnotationMinReadyEndpoints]); err == nil && n >= 1 {
		p.MinReady = n
	}
	if order := annotations[api.AnnotationFailoverOrder]; order != "" {
		p.Order = strings.Split(order, ",")
	}
	return p
}

// Endpoints say where a query's ready endpoints are: this cluster's own
// (L), and the other providers' (R), whose Lease is fresh or has expired.
type Endpoints struct {
	Local int  // how many ready endpoints L holds
	Fresh bool // a fresh provider has a ready endpoint in R
	Stale bool // a stale provider has a ready endpoint in R
}

// Set is the addresses a query is answered with.
type Set uint8

const (
	None          Set = iota // nothing: the next plugin answers, as for an endpoint-less service
	LocalVIP                 // VIP_local
	SetVIP                   // VIP_set
	Local                    // L
	LocalAndFresh            // L and the fresh providers' endpoints in R
	Fresh                    // the fresh providers' endpoints in R
	Stale                    // the stale providers' endpoints in R: nothing else is left
)

// Answer is the table's verdict for one query.
type Answer struct {
	Set Set
	// Failover: the failover order picks among Set's providers (Preferred).
	Failover bool
	// FellBack: LocalFirst answers from R, as fewer than its minimum of
	// local endpoints are ready.
	FellBack bool
}

// Service decides a service's name (<svc>.<ns>.svc.cluster.local and its
// SRV names).
func Service(r *Rules, e Endpoints) Answer {
	a := service(r, e)
	if r.Remapped && !r.Headless && a.Set.addresses() {
		return Answer{}
	}
	return a
}

func service(r *Rules, e Endpoints) Answer {
	if a, ok := Fixed(r); ok {
		return a
	}
	if r.LocalFirst {
		return localFirst(r, r.vip(), e)
	}
	switch {
	case e.Local > 0 || e.Fresh:
		return Answer{Set: LocalAndFresh}
	case e.Stale:
		return Answer{Set: Stale}
	}
	return Answer{}
}

// Fixed is Service's answer when it does not depend on the endpoints:
// RemoteAndLocal answering VIP_set. The plugin asks it first, so that it
// looks up no provider's Lease to tell fresh from stale for nothing.
func Fixed(r *Rules) (Answer, bool) {
	switch {
	case !r.LocalFirst && r.vip() && r.SetVIP:
		return Answer{Set: SetVIP}, true
	case r.Remapped && !r.Headless && !r.SetVIP && (!r.LocalFirst || !r.LocalVIP):
		return Answer{}, true // no VIP it could answer, and no pod address
	}
	return Answer{}, false
}

// vip: a ClusterIP service answers VIPs under the answer option vip, and
// when its endpoints' ports are not its own.
func (r *Rules) vip() bool { return (r.AnswerVIP || r.Remapped) && !r.Headless }

// addresses reports whether s is a set of endpoints, not of VIPs.
func (s Set) addresses() bool { return s >= Local }

// Endpoint decides a per-endpoint name (web-0.web.ns.svc.cluster.local),
// given the endpoints of that hostname: a ready local one is answered
// alone, whatever the strategy and the minimum, so that no other cluster's
// pod takes a local pod's name; else the service's table decides among the
// others, for endpoints, never a VIP (as the kubernetes plugin answers).
func Endpoint(r *Rules, e Endpoints) Answer {
	if e.Local > 0 {
		return Answer{Set: Local}
	}
	endpoints := *r
	endpoints.AnswerVIP, endpoints.Remapped = false, false // a pod's own name is its address, on its own ports
	return Service(&endpoints, e)
}

// localFirst answers L while it holds the minimum of ready endpoints, else
// R's fresh endpoints; below the minimum with none fresh, L still answers,
// and the stale ones only when L is empty too (a stale cluster is used
// only when nothing else is left). With nothing ready anywhere, a VIP
// answer is VIP_local, else VIP_set.
func localFirst(r *Rules, vip bool, e Endpoints) Answer {
	local := Answer{Set: Local}
	if vip && r.LocalVIP {
		local.Set = LocalVIP
	}
	remote := func(s Set) Answer {
		if vip && r.SetVIP {
			return Answer{Set: SetVIP, FellBack: true}
		}
		return Answer{Set: s, Failover: true, FellBack: true}
	}
	switch {
	case e.Local >= max(r.MinReady, 1):
		return local
	case e.Fresh:
		return remote(Fresh)
	case e.Local == 0 && e.Stale:
		return remote(Stale)
	case e.Local > 0:
		return local
	case !vip:
		return Answer{}
	case r.LocalVIP:
		return Answer{Set: LocalVIP}
	case r.SetVIP:
		return Answer{Set: SetVIP}
	}
	return Answer{}
}
