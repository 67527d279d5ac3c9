package members

import (
	"hash/maphash"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// Every object a cache holds is decoded on its own, so the strings,
// maps and slices that thousands of them have alike (a namespace, label
// keys, the managed-by value, a port, an owner's kind) are stored once per
// object. The transforms make them point to one copy: strings through
// Go's unique package (whose copies are freed once nothing holds them);
// maps and slices through bounded tables, which lose only sharing, never
// correctness, when they forget one. Nothing changes a cached object in
// place (a writer deep-copies it first), so sharing is safe.

// intern is the canonical copy of s.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

func internAll(ss []string) []string {
	for i, s := range ss {
		ss[i] = intern(s)
	}
	return ss
}

// internPtr is the shared pointer to what p points to, interned.
func internPtr[T ~string](p *T) *T {
	if p == nil {
		return nil
	}
	equal := func(o any) bool { q, ok := o.(*T); return ok && *q == *p }
	return sharedStrings.share(hashOf(string(*p)), p, equal, func() any { v := T(intern(string(*p))); return &v }).(*T)
}

func hashOf(parts ...string) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	for _, p := range parts {
		h.WriteString(p)
		h.WriteByte(0)
	}
	return h.Sum64()
}

// table holds shared values by their hash: a value already there that
// equals the one offered is used instead. It has a fixed number of slots;
// one offered for a taken slot replaces what was there, which stays shared
// by the objects that have it.
type table struct {
	mu    sync.Mutex
	slots [4096]struct {
		hash uint64
		val  any
	}
}

// Tables by what they share.
var (
	sharedMaps    table
	sharedSlices  table
	sharedStrings table // pointers to strings: port names, policies, zones
	seed          = maphash.MakeSeed()
)

// share is the value in the table equal to v, whose hash is hash, or v
// made shareable by own (which interns what it holds) and kept.
func (t *table) share(hash uint64, v any, equal func(any) bool, own func() any) any {
	slot := &t.slots[hash%uint64(len(t.slots))]
	t.mu.Lock()
	defer t.mu.Unlock()
	if slot.val != nil && slot.hash == hash && equal(slot.val) {
		return slot.val
	}
	slot.hash, slot.val = hash, own()
	return slot.val
}

// share is the shared copy of a label, annotation or selector map, its
// keys and values interned. An empty map stays as it is: nil and empty
// serialize alike, but a reader may tell them apart.
func share(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	var sum uint64 // of every entry's hash: the same in any order
	var h maphash.Hash
	h.SetSeed(seed)
	for k, v := range m {
		h.Reset()
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(v)
		sum += h.Sum64()
	}
	return sharedMaps.share(sum, m, func(o any) bool { return maps.Equal(o.(map[string]string), m) }, func() any {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[intern(k)] = intern(v)
		}
		return out
	}).(map[string]string)
}

// shareMeta drops an object's managedFields (an update that omits them
// leaves them as they are) and shares what its metadata has in common
// with others'.
func shareMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	m.Namespace = intern(m.Namespace)
	m.Labels, m.Annotations = share(m.Labels), share(m.Annotations)
	m.Finalizers = internAll(m.Finalizers)
	for i := range m.OwnerReferences {
		o := &m.OwnerReferences[i]
		o.APIVersion, o.Kind = intern(o.APIVersion), intern(o.Kind)
	}
}

// shareSlice is the shared copy of s, each of whose elements key spells
// out and internIn interns.
func shareSlice[E any](s []E, key func(E) string, internIn func(*E)) []E {
	if len(s) == 0 {
		return s
	}
	parts := make([]string, len(s))
	for i, e := range s {
		parts[i] = key(e)
	}
	equal := func(o any) bool { q, ok := o.([]E); return ok && reflect.DeepEqual(q, s) }
	return sharedSlices.share(hashOf(parts...), s, equal, func() any {
		for i := range s {
			internIn(&s[i])
		}
		return s
	}).([]E)
}

func deref[T ~string](p *T) string {
	if p == nil {
		return "\x02" // not the empty string
	}
	return string(*p)
}

func shareImport(imp *mcsv1b1.ServiceImport) {
	s := &imp.Spec
	s.Type = mcsv1b1.ServiceImportType(intern(string(s.Type)))
	s.Ports = shareSlice(s.Ports, func(p mcsv1b1.ServicePort) string {
		return strings.Join([]string{p.Name, string(p.Protocol), deref(p.AppProtocol), strconv.Itoa(int(p.Port))}, "\x00")
	}, func(p *mcsv1b1.ServicePort) {
		p.Name, p.Protocol, p.AppProtocol = intern(p.Name), corev1.Protocol(intern(string(p.Protocol))), internPtr(p.AppProtocol)
	})
	s.SessionAffinity = corev1.ServiceAffinity(intern(string(s.SessionAffinity)))
	s.InternalTrafficPolicy, s.TrafficDistribution = internPtr(s.InternalTrafficPolicy), internPtr(s.TrafficDistribution)
	s.IPFamilies = shareSlice(s.IPFamilies, func(f corev1.IPFamily) string { return string(f) }, func(f *corev1.IPFamily) { *f = corev1.IPFamily(intern(string(*f))) })
	st := &imp.Status
	st.Clusters = shareSlice(st.Clusters, func(c mcsv1b1.ClusterStatus) string { return c.Cluster }, func(c *mcsv1b1.ClusterStatus) { c.Cluster = intern(c.Cluster) })
	st.EndpointSliceObjects = mcsv1b1.EndpointSliceObjectsStatus(intern(string(st.EndpointSliceObjects)))
	shareConditions(st.Conditions)
}

func shareMCS(m *v1alpha1.MultiClusterService) {
	s := &m.Spec
	s.Types = shareSlice(s.Types, func(t v1alpha1.ExposureType) string { return string(t) }, func(t *v1alpha1.ExposureType) { *t = v1alpha1.ExposureType(intern(string(*t))) })
	clusters := func(l []v1alpha1.ClusterName) []v1alpha1.ClusterName {
		return shareSlice(l, func(c v1alpha1.ClusterName) string { return string(c) }, func(c *v1alpha1.ClusterName) { *c = v1alpha1.ClusterName(intern(string(*c))) })
	}
	s.ServiceProvisionClusters, s.ServiceConsumptionClusters = clusters(s.ServiceProvisionClusters), clusters(s.ServiceConsumptionClusters)
	s.Strategy = api.Strategy(intern(string(s.Strategy)))
	if s.LocalFirst != nil {
		s.LocalFirst.FailoverOrder = clusters(s.LocalFirst.FailoverOrder)
	}
	shareConditions(m.Status.Conditions)
}

// shareConditions interns what conditions say; their messages repeat
// across objects more often than not ("imported from member1").
func shareConditions(conds []metav1.Condition) {
	for i := range conds {
		c := &conds[i]
		c.Type, c.Status, c.Reason, c.Message = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status))), intern(c.Reason), intern(c.Message)
	}
}
