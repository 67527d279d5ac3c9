package members

import (
	"fmt"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// The objects a fleet has thousands of are held packed: trimmed
// (trim.go), encoded (protobuf for built-in types, JSON for custom
// resources), and compressed against an object of their kind
// (compress.go). Decoded, with its maps, slices and pointers, an object
// takes ten to twenty times the bytes. Readers (read.go) get one decoded
// afresh, theirs to keep or change; a sync decodes the few it reads in
// microseconds. What the informers read of every object (its key, its
// resourceVersion), and whether the controller made it, needs no
// decoding.

// packed is one object of type T, packed.
type packed[T any] struct {
	namespace, name, resourceVersion string
	data                             []byte
	dict                             *dictionary // what data is compressed against, and its class
	// size is the object's encoded bytes, which every read decodes
	// however few data takes (heldBytes).
	size int
}

type (
	packedService = packed[corev1.Service]
	packedSlice   = packed[discoveryv1.EndpointSlice]
	packedImport  = packed[mcsv1b1.ServiceImport]
	packedExport  = packed[mcsv1b1.ServiceExport]
	packedMCS     = packed[v1alpha1.MultiClusterService]
)

// pack packs obj, of class ours or not (see ours).
func pack[T any](obj *T, ours bool) (*packed[T], error) {
	m := any(obj).(metav1.Object)
	data, err := encode(obj)
	if err != nil {
		return nil, fmt.Errorf("packing %s/%s: %w", m.GetNamespace(), m.GetName(), err)
	}
	d := dictionaryOf[T](ours)
	return &packed[T]{namespace: intern(m.GetNamespace()), name: m.GetName(), resourceVersion: m.GetResourceVersion(), data: d.compress(data), dict: d, size: len(data)}, nil
}

// heldBytes is what p is counted as holding: its names, and its object
// as encoded, not as compressed: a few KiB packed may decode to many
// MiB, at every read. It bounds what p's data takes too: one that does
// not compress is stored as it is.
func (p *packed[T]) heldBytes() int {
	return p.size + len(p.namespace) + len(p.name) + len(p.resourceVersion)
}

// unpack is the object, decoded afresh. It was encoded by pack: decoding
// it cannot fail but for a bug, which must not pass unnoticed.
func (p *packed[T]) unpack() *T {
	var t T
	if err := p.dict.decompressed(p.data, func(data []byte) error { return decode(data, &t) }); err != nil {
		panic(fmt.Sprintf("unpacking %s/%s: %v", p.namespace, p.name, err))
	}
	return &t
}

// Unpacked is obj as a reader wants it: a packed object decoded, anything
// else as it is.
func Unpacked(obj any) any {
	switch p := obj.(type) {
	case *packedService:
		return p.unpack()
	case *packedSlice:
		return p.unpack()
	case *packedImport:
		return p.unpack()
	case *packedExport:
		return p.unpack()
	case *packedMCS:
		return p.unpack()
	}
	return obj
}

// ours reports whether obj was packed as the controller's: a Service or
// EndpointSlice with its managed-by label, a ServiceImport it made or
// filled.
func ours(obj any) bool {
	o, ok := obj.(interface{ class() *dictionary })
	return ok && o.class().ours
}

func (p *packed[T]) class() *dictionary { return p.dict }

// A packed object is a metav1.Object, as the informers' keys, their
// update events and the controller's handlers want it. Its setters are
// never called: a cached object is read-only.

func (p *packed[T]) meta() metav1.Object        { return any(p.unpack()).(metav1.Object) }
func (p *packed[T]) readOnly()                  { panic("members: a cached object is read-only") }
func (p *packed[T]) GetNamespace() string       { return p.namespace }
func (p *packed[T]) GetName() string            { return p.name }
func (p *packed[T]) GetResourceVersion() string { return p.resourceVersion }
func (p *packed[T]) GetGenerateName() string    { return p.meta().GetGenerateName() }
func (p *packed[T]) GetUID() types.UID          { return p.meta().GetUID() }
func (p *packed[T]) GetGeneration() int64       { return p.meta().GetGeneration() }
func (p *packed[T]) GetSelfLink() string        { return p.meta().GetSelfLink() }
func (p *packed[T]) GetCreationTimestamp() metav1.Time {
	return p.meta().GetCreationTimestamp()
}
func (p *packed[T]) GetDeletionTimestamp() *metav1.Time { return p.meta().GetDeletionTimestamp() }
func (p *packed[T]) GetDeletionGracePeriodSeconds() *int64 {
	return p.meta().GetDeletionGracePeriodSeconds()
}
func (p *packed[T]) GetLabels() map[string]string      { return p.meta().GetLabels() }
func (p *packed[T]) GetAnnotations() map[string]string { return p.meta().GetAnnotations() }
func (p *packed[T]) GetFinalizers() []string           { return p.meta().GetFinalizers() }
func (p *packed[T]) GetOwnerReferences() []metav1.OwnerReference {
	return p.meta().GetOwnerReferences()
}
func (p *packed[T]) GetManagedFields() []metav1.ManagedFieldsEntry {
	return p.meta().GetManagedFields()
}
func (p *packed[T]) SetNamespace(string)                          { p.readOnly() }
func (p *packed[T]) SetName(string)                               { p.readOnly() }
func (p *packed[T]) SetGenerateName(string)                       { p.readOnly() }
func (p *packed[T]) SetUID(types.UID)                             { p.readOnly() }
func (p *packed[T]) SetResourceVersion(string)                    { p.readOnly() }
func (p *packed[T]) SetGeneration(int64)                          { p.readOnly() }
func (p *packed[T]) SetSelfLink(string)                           { p.readOnly() }
func (p *packed[T]) SetCreationTimestamp(metav1.Time)             { p.readOnly() }
func (p *packed[T]) SetDeletionTimestamp(*metav1.Time)            { p.readOnly() }
func (p *packed[T]) SetDeletionGracePeriodSeconds(*int64)         { p.readOnly() }
func (p *packed[T]) SetLabels(map[string]string)                  { p.readOnly() }
func (p *packed[T]) SetAnnotations(map[string]string)             { p.readOnly() }
func (p *packed[T]) SetFinalizers([]string)                       { p.readOnly() }
func (p *packed[T]) SetOwnerReferences([]metav1.OwnerReference)   { p.readOnly() }
func (p *packed[T]) SetManagedFields([]metav1.ManagedFieldsEntry) { p.readOnly() }

// intern is the canonical copy of s: a packed object's namespace, which
// thousands of them share.
func intern(s string) string { return unique.Make(s).Value() }
