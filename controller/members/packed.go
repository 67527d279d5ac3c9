package members

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Services and EndpointSlices, the objects a fleet has most of, are held
// packed: trimmed (trim.go), then in protobuf, which takes a third to a
// quarter of the bytes of the decoded object with its maps, slices and
// pointers. Readers (read.go) get one decoded afresh, theirs to keep or
// change; a sync decodes the few it reads in microseconds. What the
// informers themselves read of every object (its key, its
// resourceVersion) needs no decoding.

// packed is one object of type T, packed.
type packed[T any, P message[T]] struct {
	namespace, name, resourceVersion string
	data                             []byte
}

// message is a generated API type: T's pointer with its protobuf codec.
type message[T any] interface {
	*T
	metav1.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

type (
	packedService = packed[corev1.Service, *corev1.Service]
	packedSlice   = packed[discoveryv1.EndpointSlice, *discoveryv1.EndpointSlice]
)

func pack[T any, P message[T]](obj P) (*packed[T, P], error) {
	data, err := obj.Marshal()
	if err != nil {
		return nil, fmt.Errorf("packing %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return &packed[T, P]{namespace: intern(obj.GetNamespace()), name: obj.GetName(), resourceVersion: obj.GetResourceVersion(), data: data}, nil
}

// unpack is the object, decoded afresh. It was encoded by pack: decoding
// it cannot fail but for a bug, which must not pass unnoticed.
func (p *packed[T, P]) unpack() P {
	var t T
	if err := P(&t).Unmarshal(p.data); err != nil {
		panic(fmt.Sprintf("unpacking %s/%s: %v", p.namespace, p.name, err))
	}
	return &t
}

// Unpacked is obj as a reader wants it: a Service or EndpointSlice of a
// cache decoded, anything else as it is.
func Unpacked(obj any) any {
	switch p := obj.(type) {
	case *packedService:
		return p.unpack()
	case *packedSlice:
		return p.unpack()
	}
	return obj
}

// A packed object is a metav1.Object, as the informers' keys, their
// update events and the controller's handlers want it. Its setters are
// never called: a cached object is read-only.

func (p *packed[T, P]) meta() metav1.Object        { return p.unpack() }
func (p *packed[T, P]) readOnly()                  { panic("members: a cached object is read-only") }
func (p *packed[T, P]) GetNamespace() string       { return p.namespace }
func (p *packed[T, P]) GetName() string            { return p.name }
func (p *packed[T, P]) GetResourceVersion() string { return p.resourceVersion }
func (p *packed[T, P]) GetGenerateName() string    { return p.meta().GetGenerateName() }
func (p *packed[T, P]) GetUID() types.UID          { return p.meta().GetUID() }
func (p *packed[T, P]) GetGeneration() int64       { return p.meta().GetGeneration() }
func (p *packed[T, P]) GetSelfLink() string        { return p.meta().GetSelfLink() }
func (p *packed[T, P]) GetCreationTimestamp() metav1.Time {
	return p.meta().GetCreationTimestamp()
}
func (p *packed[T, P]) GetDeletionTimestamp() *metav1.Time { return p.meta().GetDeletionTimestamp() }
func (p *packed[T, P]) GetDeletionGracePeriodSeconds() *int64 {
	return p.meta().GetDeletionGracePeriodSeconds()
}
func (p *packed[T, P]) GetLabels() map[string]string      { return p.meta().GetLabels() }
func (p *packed[T, P]) GetAnnotations() map[string]string { return p.meta().GetAnnotations() }
func (p *packed[T, P]) GetFinalizers() []string           { return p.meta().GetFinalizers() }
func (p *packed[T, P]) GetOwnerReferences() []metav1.OwnerReference {
	return p.meta().GetOwnerReferences()
}
func (p *packed[T, P]) GetManagedFields() []metav1.ManagedFieldsEntry {
	return p.meta().GetManagedFields()
}
func (p *packed[T, P]) SetNamespace(string)                          { p.readOnly() }
func (p *packed[T, P]) SetName(string)                               { p.readOnly() }
func (p *packed[T, P]) SetGenerateName(string)                       { p.readOnly() }
func (p *packed[T, P]) SetUID(types.UID)                             { p.readOnly() }
func (p *packed[T, P]) SetResourceVersion(string)                    { p.readOnly() }
func (p *packed[T, P]) SetGeneration(int64)                          { p.readOnly() }
func (p *packed[T, P]) SetSelfLink(string)                           { p.readOnly() }
func (p *packed[T, P]) SetCreationTimestamp(metav1.Time)             { p.readOnly() }
func (p *packed[T, P]) SetDeletionTimestamp(*metav1.Time)            { p.readOnly() }
func (p *packed[T, P]) SetDeletionGracePeriodSeconds(*int64)         { p.readOnly() }
func (p *packed[T, P]) SetLabels(map[string]string)                  { p.readOnly() }
func (p *packed[T, P]) SetAnnotations(map[string]string)             { p.readOnly() }
func (p *packed[T, P]) SetFinalizers([]string)                       { p.readOnly() }
func (p *packed[T, P]) SetOwnerReferences([]metav1.OwnerReference)   { p.readOnly() }
func (p *packed[T, P]) SetManagedFields([]metav1.ManagedFieldsEntry) { p.readOnly() }
