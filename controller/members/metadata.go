package members

import (
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The labels and annotations of the objects the controller writes back
// (its own Services and slices, every ServiceImport) are anyone's to add
// to in the member: up to 256 KiB of annotations an object, which the
// caches would hold for as long as the object lives. Within
// MaxHeldMetadata they are kept whole, as an update must send them back;
// past it, a cached copy keeps only the keys the controller reads or
// writes (heldKeys), each at most maxHeldValue long, and is marked
// AnnotationTrimmed. A write of a marked object starts from the object
// read afresh (controller/apply.go), so what others added is kept as it
// is on the API server, and never read into the caches.

// MaxHeldMetadata bounds the bytes of an object's labels and annotations
// (keys and values) that a cached copy keeps whole. What the controller
// itself writes stays well within it: a ServiceImport's exported labels
// and annotations are bounded by desired.MaxExportedMetadata.
const MaxHeldMetadata = 16 << 10

// maxHeldValue is the longest value of a held key a trimmed copy keeps:
// the longest the controller writes is a failover order of 64 clusters of
// 63 characters.
const maxHeldValue = 4 << 10

// AnnotationTrimmed marks a cached copy that lacks labels or annotations
// the object has. It is never written: a write of a marked object starts
// from the object read afresh.
const AnnotationTrimmed = api.GroupName + "/trimmed"

// heldKeys are the labels and annotations the controller reads of, or
// writes into, its own objects and ServiceImports.
var heldKeys = map[string]bool{
	api.LabelManagedBy: true, api.LabelBucket: true,
	mcsv1b1.LabelServiceName: true, mcsv1b1.LabelSourceCluster: true,
	discoveryv1.LabelManagedBy: true, discoveryv1.LabelServiceName: true,
	api.AnnotationStrategy: true, api.AnnotationMinReadyEndpoints: true, api.AnnotationFailoverOrder: true,
	api.AnnotationSourceGeneration: true, api.AnnotationFilled: true, api.AnnotationStale: true, api.AnnotationProviderVIPs: true,
}

// boundMetadata trims m's labels and annotations when they take more than
// MaxHeldMetadata, and marks it. A mark the object came with is the
// member's, never honoured: it would make every write GET first.
func boundMetadata(m *metav1.ObjectMeta) {
	delete(m.Annotations, AnnotationTrimmed)
	if api.MetadataBytes(m.Labels)+api.MetadataBytes(m.Annotations) <= MaxHeldMetadata {
		return
	}
	m.Labels, m.Annotations = held(m.Labels), held(m.Annotations)
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[AnnotationTrimmed] = "labels or annotations of others, not held"
}

// held is what a trimmed copy keeps of in.
func held(in map[string]string) map[string]string {
	var out map[string]string
	for k, v := range in {
		if heldKeys[k] && len(v) <= maxHeldValue {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// Trimmed reports whether o is a cached copy that lacks labels or
// annotations the object has: a write must start from the object read
// afresh.
func Trimmed(o metav1.Object) bool {
	_, ok := o.GetAnnotations()[AnnotationTrimmed]
	return ok
}
