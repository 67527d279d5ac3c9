package members

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// What the controller's sync reads of a member: its informers' caches.
// Every reader returns nothing before the informers started.

// Service is the member's Service namespace/name, or nil.
func (m *Member) Service(namespace, name string) *corev1.Service {
	return get[corev1.Service](m, func(c *caches) Scoped { return c.services }, namespace, name)
}

// Export is the member's ServiceExport namespace/name, or nil.
func (m *Member) Export(namespace, name string) *mcsv1b1.ServiceExport {
	return get[mcsv1b1.ServiceExport](m, func(c *caches) Scoped { return c.exports }, namespace, name)
}

// Import is the member's ServiceImport namespace/name, or nil.
func (m *Member) Import(namespace, name string) *mcsv1b1.ServiceImport {
	return get[mcsv1b1.ServiceImport](m, func(c *caches) Scoped { return c.imports }, namespace, name)
}

// Slice is the member's EndpointSlice namespace/name, or nil.
func (m *Member) Slice(namespace, name string) *discoveryv1.EndpointSlice {
	return get[discoveryv1.EndpointSlice](m, func(c *caches) Scoped { return c.slices }, namespace, name)
}

// HasExport and HasImport report whether the member has the
// ServiceExport or ServiceImport namespace/name, decoding nothing.
func (m *Member) HasExport(namespace, name string) bool {
	return has(m, func(c *caches) Scoped { return c.exports }, namespace, name)
}

func (m *Member) HasImport(namespace, name string) bool {
	return has(m, func(c *caches) Scoped { return c.imports }, namespace, name)
}

func has(m *Member, pick func(*caches) Scoped, namespace, name string) bool {
	c := m.current()
	return c != nil && pick(c).Get(namespace, name) != nil
}

// HasNamespace reports whether the member has the namespace.
func (m *Member) HasNamespace(name string) bool {
	c := m.current()
	if c == nil {
		return false
	}
	_, ok, err := c.namespaces.GetStore().GetByKey(name)
	return ok && err == nil
}

// get is the object namespace/name of the informers pick picks, or nil;
// nil too in a namespace the controller does not sync.
func get[T any](m *Member, pick func(*caches) Scoped, namespace, name string) *T {
	c := m.current()
	if c == nil {
		return nil
	}
	t, _ := Unpacked(pick(c).Get(namespace, name)).(*T)
	return t
}

// SourceSlices lists the member's own slices of service namespace/name,
// sorted by name.
func (m *Member) SourceSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	return m.slicesOf(namespace, name, false)
}

// ImportedSlices lists the slices the controller imported into the member
// for service namespace/name, sorted by name.
func (m *Member) ImportedSlices(namespace, name string) []*discoveryv1.EndpointSlice {
	return m.slicesOf(namespace, name, true)
}

func (m *Member) slicesOf(namespace, name string, imported bool) []*discoveryv1.EndpointSlice {
	var out []*discoveryv1.EndpointSlice
	for _, o := range m.indexed(namespace + "/" + name) {
		if ours(o) != imported {
			continue
		}
		if s, ok := Unpacked(o).(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// indexed is the member's slices filed under service key, packed.
func (m *Member) indexed(key string) []any {
	c := m.current()
	if c == nil {
		return nil
	}
	ns, _, _ := strings.Cut(key, "/")
	return filedUnder(c.slices.Of(ns), key)
}

// filedUnder is the slices inf files under service key, packed.
func filedUnder(inf cache.SharedIndexInformer, key string) []any {
	if inf == nil {
		return nil
	}
	objs, err := inf.GetIndexer().ByIndex(byService, key)
	if err != nil {
		return nil
	}
	return objs
}

// ProviderServices lists the controller's provider Services of service
// namespace/name (api/providers.go), sorted by name.
func (m *Member) ProviderServices(namespace, name string) []*corev1.Service {
	c := m.current()
	if c == nil {
		return nil
	}
	var out []*corev1.Service
	for _, o := range filedUnder(c.services.Of(namespace), namespace+"/"+name) {
		if s, ok := Unpacked(o).(*corev1.Service); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Service) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ImportKeys lists the keys (namespace/name) of every ServiceImport the member has.
func (m *Member) ImportKeys() []string {
	return keys(m, func(c *caches) Scoped { return c.imports })
}

// ExportKeys lists the keys (namespace/name) of every ServiceExport the member has.
func (m *Member) ExportKeys() []string {
	return keys(m, func(c *caches) Scoped { return c.exports })
}

// keys lists the keys of the objects of the informers pick picks.
func keys(m *Member, pick func(*caches) Scoped) []string {
	c := m.current()
	if c == nil {
		return nil
	}
	return pick(c).Keys()
}

// Holds reports whether the member's caches hold an object the controller
// wrote for service namespace/name: an imported slice, the derived, a
// provider or a propagated Service, or a ServiceImport it made or filled.
func (m *Member) Holds(namespace, name string) bool {
	if slices.ContainsFunc(m.indexed(namespace+"/"+name), ours) {
		return true
	}
	for _, s := range []*corev1.Service{m.Service(namespace, name), m.Service(namespace, api.DerivedPrefix+name)} {
		if s != nil && s.Labels[api.LabelManagedBy] == api.ManagedBy {
			return true
		}
	}
	if len(m.ProviderServices(namespace, name)) > 0 {
		return true
	}
	imp := m.Import(namespace, name)
	return imp != nil && ourImport(imp)
}

// ourImport: the controller made the import, or filled it in.
func ourImport(imp *mcsv1b1.ServiceImport) bool {
	_, filled := imp.Annotations[api.AnnotationFilled]
	return imp.Labels[api.LabelManagedBy] == api.ManagedBy || filled
}

// ManagedKeys lists the services (namespace/name) of which the member
// holds an object the controller wrote: an imported slice, a derived,
// provider or propagated Service carrying its label, or a ServiceImport it
// made or filled. A provider Service is listed under the service it
// routes to a provider of (providerIndex).
func (m *Member) ManagedKeys() []string {
	c := m.current()
	if c == nil {
		return nil
	}
	var keys []string
	for _, inf := range c.slices {
		for _, k := range inf.GetIndexer().ListIndexFuncValues(byService) {
			if slices.ContainsFunc(filedUnder(inf, k), ours) {
				keys = append(keys, k)
			}
		}
	}
	keys = append(keys, oursKeys(c.services, api.DerivedPrefix)...)
	for _, inf := range c.services {
		keys = append(keys, inf.GetIndexer().ListIndexFuncValues(byService)...)
	}
	keys = append(keys, oursKeys(c.imports, "")...)
	slices.Sort(keys)
	return slices.Compact(keys)
}

// oursKeys lists the keys of the objects packed as the controller's, the
// prefix cut from their names; it decodes none.
func oursKeys(s Scoped, prefix string) []string {
	var keys []string
	for _, obj := range s.List() {
		if o, ok := obj.(metav1.Object); ok && ours(obj) && !api.IsProviderService(o.GetName()) {
			keys = append(keys, o.GetNamespace()+"/"+strings.TrimPrefix(o.GetName(), prefix))
		}
	}
	return keys
}
