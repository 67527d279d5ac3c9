package controller

import (
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// What queues a service: the hub's and the members' informers' events,
// a member that comes, goes or changes, and a resync.

// Handlers are the registry's handlers: member events feed the queue.
func (c *Controller) Handlers() members.Handlers {
	return members.Handlers{
		Services: func(cluster string, obj any) {
			if a, ok := metaOf(obj); ok {
				c.costTouched(cluster, a.namespace, a.name, false)
			}
			c.serviceEvent(cluster, obj)
		},
		Slices: c.sliceEvent,
		Exports: func(cluster string, obj any) {
			if a, ok := metaOf(obj); ok {
				c.costTouched(cluster, a.namespace, a.name, true)
			}
			c.memberEvent(cluster, obj)
		},
		Imports: c.memberEvent,
		Delivered: func(cluster, kind string, obj metav1.Object, gone bool) bool {
			return c.track.delivered(trackKey{cluster, kind, obj.GetNamespace(), obj.GetName()}, obj, gone)
		},
		Allowed: c.allowed,
		Changed: c.memberChanged,
	}
}

func (c *Controller) enqueue(namespace, name string) {
	if c.mine(namespace, name) {
		c.queue.Add(namespace + "/" + name)
	}
}

// enqueueObject queues the object's key, with prefix cut from its name.
func (c *Controller) enqueueObject(obj any, prefix string) {
	a, ok := metaOf(obj)
	if !ok {
		return
	}
	c.enqueue(a.namespace, strings.TrimPrefix(a.name, prefix))
}

// enqueueRelevant queues a Service's key when something multi-cluster is
// asked of it: ordinary Services of big clusters cost no syncs.
func (c *Controller) enqueueRelevant(obj any) {
	a, ok := metaOf(obj)
	if ok && c.relevant(a.namespace, a.name) {
		c.enqueue(a.namespace, a.name)
	}
}

// memberEvent queues, as cluster's budget allows, the service of the
// object a member changed.
func (c *Controller) memberEvent(cluster string, obj any) {
	if a, ok := metaOf(obj); ok {
		c.changed(cluster, a.namespace, a.name)
	}
}

// changed queues service namespace/name, of this replica's, for a change
// of cluster's, as its budget allows (budget.go).
func (c *Controller) changed(cluster, namespace, name string) {
	if c.mine(namespace, name) {
		c.sourceChanged(cluster, namespace+"/"+name)
	}
}

// serviceEvent queues the service a Service is, and the one it is the
// derived- name of: also when that one is someone else's (Karmada's, say),
// so that the controller takes the name over as soon as it is deleted. A
// user's Service named derived-foo may be a multi-cluster service of its
// own besides: both are queued. A provider Service of the controller's
// queues the service it routes to a provider of.
func (c *Controller) serviceEvent(cluster string, obj any) {
	a, ok := metaOf(obj)
	if !ok {
		return
	}
	if api.IsProviderService(a.name) && a.labels()[api.LabelManagedBy] == api.ManagedBy {
		// A provider Service's name does not tell its service: its label does.
		if svc := a.labels()[mcsv1b1.LabelServiceName]; svc != "" {
			c.changed(cluster, a.namespace, svc)
		}
		return
	}
	if svc, derived := strings.CutPrefix(a.name, api.DerivedPrefix); derived && (a.labels()[api.LabelManagedBy] == api.ManagedBy || c.relevant(a.namespace, svc)) {
		c.changed(cluster, a.namespace, svc)
	}
	if c.relevant(a.namespace, a.name) {
		c.changed(cluster, a.namespace, a.name)
	}
}

func (c *Controller) sliceEvent(cluster string, obj any) {
	a, ok := metaOf(obj)
	if !ok {
		return
	}
	labels := a.labels()
	if labels[discoveryv1.LabelManagedBy] == api.ManagedBy {
		// Someone else's change to an imported slice is undone by a sync
		// (the echo of the controller's own write never gets here).
		if svc := members.ImportedService(labels); svc != "" {
			c.changed(cluster, a.namespace, svc)
		}
		return
	}
	svc := labels[discoveryv1.LabelServiceName]
	if svc != "" {
		c.costTouched(cluster, a.namespace, svc, false)
	}
	if svc == "" || !c.mine(a.namespace, svc) || !c.relevant(a.namespace, svc) {
		return
	}
	key := a.namespace + "/" + svc
	c.perService.update(key, func(s *serviceState) {
		if s.seen.IsZero() {
			s.seen = time.Now()
		}
	})
	c.sourceChanged(cluster, key)
	// A sync of the key that waits for a member's writes ends its wait,
	// so that the change goes to every other member at once (fanout.go).
	if o, ok := obj.(metav1.Object); ok {
		c.fan.sourceChanged(key, cluster, o)
	}
}

// relevant reports whether a MultiClusterService, a ServiceExport or a
// ServiceImport exists for the service anywhere.
func (c *Controller) relevant(namespace, name string) bool {
	if !c.inScope(namespace) {
		return false
	}
	if c.hub.has(namespace, name) {
		return true
	}
	for _, m := range c.opts.Members.List() {
		if m.HasExport(namespace, name) || m.HasImport(namespace, name) {
			return true
		}
	}
	return false
}

// memberChanged queues every service when a member comes, goes, syncs or
// changes reachability; a sync that finds a provider unhealthy queues its
// service again for when it would be stale (recheckStale). A member that joined and is still
// being probed and listed queues nothing until it has settled: every
// service would otherwise report it unreachable, then recover, two status
// writes and two Events each (a join of a 10,000-service fleet).
func (c *Controller) memberChanged(name string) {
	m := c.member(name)
	switch {
	case m != nil && !m.Settled():
		return
	case m == nil && name != "":
		c.forget(name)
	}
	c.enqueueAll()
}

// forget drops what the controller noted of a member that left (state.go),
// and its metric of exports over budget.
func (c *Controller) forget(member string) {
	c.perMember.forget(member)
	c.endpoints.forget(member)
}

// requeueUnseen queues the service of a write the tracker forgot before
// its informer delivered it, unless the cache holds it now: the object
// may be gone without the informer having seen it, and the sync must
// make it anew.
func (c *Controller) requeueUnseen(k trackKey, w tracked) {
	var cached metav1.Object
	switch m := c.member(k.cluster); {
	case k == mcsKey(k.namespace, k.name):
		cached = nilIfNone(c.hub.get(k.namespace, k.name))
	case k.kind == "ConfigMap":
		cached = nilIfNone(c.ages.cached(k))
	case m == nil:
		return // it left
	case k.kind == "Namespace":
		if m.HasNamespace(k.name) {
			return
		}
	case k.kind == "EndpointSlice":
		cached = nilIfNone(m.Slice(k.namespace, k.name))
	case k.kind == "Service":
		cached = nilIfNone(m.Service(k.namespace, k.name))
	case k.kind == "ServiceImport":
		cached = nilIfNone(m.Import(k.namespace, k.name))
	case k.kind == "ServiceExport":
		cached = nilIfNone(m.Export(k.namespace, k.name))
	}
	if cached == nil || !newerOrSame(cached, w.obj) {
		c.queue.Add(w.service)
	}
}

// nilIfNone is o as a metav1.Object, nil for a nil pointer.
func nilIfNone[P interface {
	*E
	metav1.Object
}, E any](o P) metav1.Object {
	if o == nil {
		return nil
	}
	return o
}

// Resync queues every service: those of the shards just held too, whose
// export ages are read from the hub again.
func (c *Controller) Resync() {
	c.ages.forget()
	c.enqueueAll()
}

// enqueueAll queues every service something multi-cluster is asked of, or
// that a member holds an object of the controller's for.
func (c *Controller) enqueueAll() {
	keys := c.hub.keys()
	for _, m := range c.opts.Members.List() {
		keys = append(keys, m.ExportKeys()...)
		keys = append(keys, m.ImportKeys()...)
		keys = append(keys, m.ManagedKeys()...)
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		if c.mineKey(k) {
			c.queue.Add(k)
		}
	}
}

type objectMeta struct {
	namespace, name string
	obj             labelled
}

type labelled interface {
	GetNamespace() string
	GetName() string
	GetLabels() map[string]string
}

// labels are the object's labels, which a cached object decodes: the
// handlers that need no labels read none.
func (o objectMeta) labels() map[string]string { return o.obj.GetLabels() }

func metaOf(obj any) (objectMeta, bool) {
	o, ok := handler.Unwrap(obj).(labelled)
	if !ok {
		return objectMeta{}, false
	}
	return objectMeta{o.GetNamespace(), o.GetName(), o}, true
}
