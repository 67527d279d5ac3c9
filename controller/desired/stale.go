package desired

import (
	"maps"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The VIP follows the rule coredns-mcs follows in DNS (plugin/mcs README,
// "Stale clusters"): a provision cluster that has been unhealthy for as
// long as its Lease lasts is stale, and while another provider has a ready
// endpoint, the stale one's imported endpoints say ready: false, so that
// kube-proxy sends nothing to a cluster that may be gone. Staleness alone
// never leaves a service without a ready endpoint: with no other ready
// endpoint, the stale cluster's stay as they were. A cluster that is back
// and synced is imported as it is.

// markStale marks the imported slices of stale providers, and notes what
// the writers need for the slices of stale members that are not known.
func (p *Plan) markStale(in *Input) {
	for _, name := range slices.Sorted(maps.Keys(in.Members)) {
		if in.Members[name].Stale {
			p.Stale = append(p.Stale, name)
		}
	}
	// Asked with no member stale too: a mark found on a slice of a member
	// not known stays while it holds (Restale).
	p.ReadyElsewhere = slices.ContainsFunc(p.Slices, func(s *discoveryv1.EndpointSlice) bool {
		return !p.isStale(s) && slices.ContainsFunc(s.Endpoints, ready)
	})
	if len(p.Stale) == 0 || !p.ReadyElsewhere {
		return
	}
	for i, s := range p.Slices {
		if p.isStale(s) {
			p.Slices[i] = notReady(s)
		}
	}
}

func (p *Plan) isStale(s *discoveryv1.EndpointSlice) bool {
	return slices.Contains(p.Stale, s.Labels[mcsv1b1.LabelSourceCluster])
}

// Restale is what an imported slice the controller cannot read the source
// of (its cluster's caches have not synced) should be: not ready while its
// cluster is stale, or was marked so, and another has a ready endpoint,
// else as it was before it was marked. Nil when it is right as it is. A
// mark outlives the process that made it: a controller started while the
// cluster is away, which would count the cluster's absence from its own
// start, keeps it until the cluster is back (and known) or nothing else
// is ready.
func (p *Plan) Restale(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	_, marked := s.Annotations[api.AnnotationStale]
	switch mark := (p.isStale(s) || marked) && p.ReadyElsewhere; {
	case mark && !marked:
		return notReady(s)
	case !mark && marked:
		return readyAgain(s)
	}
	return nil
}

// ready is what Kubernetes means by a ready endpoint: conditions.ready
// true or unset.
func ready(e discoveryv1.Endpoint) bool { return ptr.Deref(e.Conditions.Ready, true) }

// notReady is s with no endpoint ready, each serving as it was (an unset
// serving takes the value ready had, so that readyAgain can undo it), and
// annotated with why.
func notReady(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := s.DeepCopy()
	for i := range out.Endpoints {
		c := &out.Endpoints[i].Conditions
		if c.Serving == nil {
			c.Serving = ptr.To(ready(out.Endpoints[i]))
		}
		c.Ready = ptr.To(false)
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[api.AnnotationStale] = s.Labels[mcsv1b1.LabelSourceCluster] + " is stale: its endpoints are not ready while another cluster has ready ones"
	return out
}

// readyAgain undoes notReady: ready is what Kubernetes derives it from,
// serving and not terminating.
func readyAgain(s *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	out := s.DeepCopy()
	for i := range out.Endpoints {
		c := &out.Endpoints[i].Conditions
		c.Ready = ptr.To(ptr.Deref(c.Serving, true) && !ptr.Deref(c.Terminating, false))
	}
	delete(out.Annotations, api.AnnotationStale)
	return out
}
