package desired

import (
	"fmt"
	"maps"
	"strings"

	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// exported is the oldest export's spec.exportedLabels and
// spec.exportedAnnotations, which KEP-1645 has the ServiceImport carry; a
// newer export whose differ conflicts (LabelsConflict,
// AnnotationsConflict), and the oldest's are used. Keys the controller
// itself uses (its managed-by label, annotations of its own group) are left
// out: an export must not make the controller take an import for its own,
// or for another's, nor set a service's strategy.
//
// An import carries at most MaxExportedMetadata bytes of them: one
// member's export must not make every consumer's ServiceImport, and the
// controller's cached copy of each, as large as the API server allows.
func (p *Plan) exported(cands []candidate) (labels, annotations map[string]string) {
	var oldest *candidate
	for i := range cands {
		if cands[i].export != nil {
			oldest = &cands[i]
			break
		}
	}
	if oldest == nil {
		return nil, nil
	}
	labels, annotations = allowedKeys(oldest.export.Spec.ExportedLabels), allowedKeys(oldest.export.Spec.ExportedAnnotations)
	if n := api.MetadataBytes(labels) + api.MetadataBytes(annotations); n > MaxExportedMetadata {
		p.conflict(oldest.cluster, mcsv1b1.ServiceExportReasonAnnotationsConflict, fmt.Sprintf(
			"%s's exportedLabels and exportedAnnotations take %d bytes, more than the %d a ServiceImport carries: none are carried", oldest.cluster, n, MaxExportedMetadata))
		return nil, nil
	}
	for _, c := range cands {
		if c.export == nil || c.cluster == oldest.cluster {
			continue
		}
		if !maps.Equal(allowedKeys(c.export.Spec.ExportedLabels), labels) {
			p.conflict(c.cluster, mcsv1b1.ServiceExportReasonLabelsConflict, fmt.Sprintf("%s's exportedLabels differ from the oldest export's (%s): the oldest one's are used", c.cluster, oldest.cluster))
		}
		if !maps.Equal(allowedKeys(c.export.Spec.ExportedAnnotations), annotations) {
			p.conflict(c.cluster, mcsv1b1.ServiceExportReasonAnnotationsConflict, fmt.Sprintf("%s's exportedAnnotations differ from the oldest export's (%s): the oldest one's are used", c.cluster, oldest.cluster))
		}
	}
	return labels, annotations
}

// MaxExportedMetadata bounds the bytes (keys and values) of the exported
// labels and annotations an import carries.
const MaxExportedMetadata = 8 << 10

func allowedKeys(in map[string]string) map[string]string {
	out := maps.Clone(in)
	maps.DeleteFunc(out, func(k, _ string) bool {
		return k == api.LabelManagedBy || strings.HasPrefix(k, api.GroupName+"/")
	})
	if len(out) == 0 {
		return nil
	}
	return out
}
