package members

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Scoped is the informers of one resource: one per namespace the
// controller syncs (--watch-namespaces), or one of every namespace, so
// that a controller limited to some namespaces holds nothing of the
// others however big the cluster. Keyed by namespace, "" for every one.
type Scoped map[string]cache.SharedIndexInformer

// NewScoped makes by inform an informer of each namespace given, or one
// of every namespace when none is.
func NewScoped(namespaces []string, inform func(namespace string) cache.SharedIndexInformer) Scoped {
	if len(namespaces) == 0 {
		namespaces = []string{metav1.NamespaceAll}
	}
	s := Scoped{}
	for _, ns := range namespaces {
		s[ns] = inform(ns)
	}
	return s
}

// NoIndex leaves out the namespace index that client-go's factories give
// their informers: no reader uses it, and it costs every object.
var NoIndex = cache.Indexers{}

// Of is the informer that holds namespace's objects, or nil when the
// controller does not sync namespace.
func (s Scoped) Of(namespace string) cache.SharedIndexInformer {
	if inf, ok := s[metav1.NamespaceAll]; ok {
		return inf
	}
	return s[namespace]
}

// Get is the object namespace/name, or nil.
func (s Scoped) Get(namespace, name string) any {
	inf := s.Of(namespace)
	if inf == nil {
		return nil
	}
	obj, ok, err := inf.GetStore().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj
}

// Keys lists the keys (namespace/name) of every object.
func (s Scoped) Keys() []string {
	var out []string
	for _, inf := range s {
		out = append(out, inf.GetStore().ListKeys()...)
	}
	return out
}

// List lists every object.
func (s Scoped) List() []any {
	var out []any
	for _, inf := range s {
		out = append(out, inf.GetStore().List()...)
	}
	return out
}

// AddEventHandler sends every informer's events to h.
func (s Scoped) AddEventHandler(h cache.ResourceEventHandler) error {
	for _, inf := range s {
		if _, err := inf.AddEventHandler(h); err != nil {
			return err
		}
	}
	return nil
}

// HasSynced reports whether every informer has delivered its first list.
func (s Scoped) HasSynced() bool {
	for _, inf := range s {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}
