package controller

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// A member that no bound narrows (--export-namespaces, or the annotation
// of its Secret) exports, by default, only from the hub's namespaces that
// the operator labelled api.LabelExports=api.ExportsAllowed: a newly
// joined member, or one taken over, cannot publish endpoints under a name
// in any namespace of every consumer, nor make that namespace there,
// unless the operator said so on the hub. Namespaces every hub has
// (default, and the add-ons' istio-system, cert-manager, monitoring)
// are therefore closed until someone opens them on purpose. The hub's
// Namespaces are held by name and that one label alone.

// DefaultExports is where a member that no bound narrows may export from.
type DefaultExports int

const (
	// AnyNamespace: every namespace, as the MCS API assumes of a
	// clusterset's members.
	AnyNamespace DefaultExports = iota
	// HubNamespaces: the namespaces that exist on the hub.
	HubNamespaces
	// LabelledHubNamespaces: the hub's namespaces labelled
	// api.LabelExports=api.ExportsAllowed (the flag's default).
	LabelledHubNamespaces
)

// ParseDefaultExports parses a value of --default-export-namespaces.
func ParseDefaultExports(v string) (DefaultExports, error) {
	switch v {
	case "labelled":
		return LabelledHubNamespaces, nil
	case "hub":
		return HubNamespaces, nil
	case "all":
		return AnyNamespace, nil
	}
	return 0, fmt.Errorf("%q: want labelled, hub or all", v)
}

func (c *Controller) watchHubNamespaces() {
	f := informers.NewSharedInformerFactoryWithOptions(c.opts.HubKube, 0, informers.WithTransform(func(obj any) (any, error) {
		if n, ok := obj.(*corev1.Namespace); ok {
			held := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.Name, ResourceVersion: n.ResourceVersion}}
			if v, ok := n.Labels[api.LabelExports]; ok {
				held.Labels = map[string]string{api.LabelExports: v}
			}
			return held, nil
		}
		return obj, nil
	}))
	c.hubFactories = append(c.hubFactories, f)
	c.hubNamespaces = f.Core().V1().Namespaces().Informer()
	c.hubNamespacesHandled, _ = c.hubNamespaces.AddEventHandler(handler.Events(func(obj any, _ bool) {
		if o, ok := handler.Unwrap(obj).(metav1.Object); ok {
			c.enqueueExportsIn(o.GetName())
		}
	}))
}

// hubNamespacesSynced reports whether the hub's Namespaces were listed and
// their handler has seen them all: the members' export quotas count the
// exports those allow (enqueueExportsIn) before a sync reads them.
func (c *Controller) hubNamespacesSynced() bool {
	return c.hubNamespaces == nil || c.hubNamespaces.HasSynced() && c.hubNamespacesHandled != nil && c.hubNamespacesHandled.HasSynced()
}

// notAllowed says why m may not export from namespace, or "": its bounds,
// else, by default, the hub's namespaces.
func (c *Controller) notAllowed(m *members.Member, namespace string) string {
	if why := m.NotAllowed(namespace); why != "" || m.Bounded() || c.hubNamespaces == nil {
		return why
	}
	obj, ok, _ := c.hubNamespaces.GetStore().GetByKey(namespace)
	unbounded := fmt.Sprintf("neither --export-namespaces nor the annotation %s of its Secret bounds it", api.AnnotationExportNamespaces)
	switch {
	case !ok:
		return fmt.Sprintf("%s may export only from namespaces of the hub (--default-export-namespaces, as %s), and the hub has no namespace %s: it does not provide %s's services",
			m.Name, unbounded, namespace, namespace)
	case c.opts.DefaultExports == LabelledHubNamespaces && obj.(*corev1.Namespace).Labels[api.LabelExports] != api.ExportsAllowed:
		return fmt.Sprintf("%s may export only from the hub's namespaces labelled %s=%s (--default-export-namespaces=labelled, as %s), and the hub's namespace %s is not: it does not provide %s's services",
			m.Name, api.LabelExports, api.ExportsAllowed, unbounded, namespace, namespace)
	}
	return ""
}

// allowed reports whether m may export namespace/name at all: whether
// its export counts against its quota (members/quota.go).
func (c *Controller) allowed(m *members.Member, namespace, name string) bool {
	return c.notAllowed(m, namespace) == "" && c.protected(namespace, name) == ""
}

// providerNotAllowed is notAllowed for a provider of namespace/name. A
// MultiClusterService of the service is the operator's own choice on the
// hub, which the default does not second-guess (its namespace need not be
// labelled); a member's own bounds still hold.
func (c *Controller) providerNotAllowed(m *members.Member, namespace, name string) string {
	if c.hub.has(namespace, name) {
		return m.NotAllowed(namespace)
	}
	return c.notAllowed(m, namespace)
}

// enqueueExportsIn queues the services exported from namespace: a hub
// namespace made, labelled or deleted allows or stops them, and they count
// against their members' quotas or no longer do, which may move others
// across it.
func (c *Controller) enqueueExportsIn(namespace string) {
	for _, m := range c.opts.Members.List() {
		for _, k := range m.RecountExports(namespace, c.allowed) {
			ns, name, _ := strings.Cut(k, "/")
			c.enqueue(ns, name)
		}
		for _, k := range m.ExportKeys() {
			if ns, name, ok := strings.Cut(k, "/"); ok && ns == namespace {
				c.enqueue(ns, name)
			}
		}
	}
}
