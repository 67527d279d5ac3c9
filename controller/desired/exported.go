package desired

import (
	"fmt"
	"maps"
	"strconv"
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
	if n := exportedBytes(oldest.export); n > MaxExportedMetadata {
		p.conflict(oldest.cluster, mcsv1b1.ServiceExportReasonAnnotationsConflict, fmt.Sprintf(
			"%s's exportedLabels and exportedAnnotations take %d bytes, more than the %d a ServiceImport carries: none are carried", oldest.cluster, n, MaxExportedMetadata))
		return nil, nil
	}
	for _, c := range cands {
		if c.export == nil || c.cluster == oldest.cluster {
			continue
		}
		if n := exportedBytes(c.export); n > MaxExportedMetadata {
			p.conflict(c.cluster, mcsv1b1.ServiceExportReasonAnnotationsConflict, fmt.Sprintf(
				"%s's exportedLabels and exportedAnnotations take %d bytes, more than the %d a ServiceImport carries: the oldest export's (%s) are used", c.cluster, n, MaxExportedMetadata, oldest.cluster))
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

// A member's caches hold of each ServiceExport no more exported labels
// and annotations than an import may carry (CutExported, which their
// transform calls): a tenant who may create ServiceExports, whose
// exportedAnnotations the API server lets take up to its 1.5 MiB request
// limit, would otherwise make the controller hold every byte of them.
// What is cut leaves its size, which the export's Conflict condition
// states.

// AnnotationExportedCut on a cached ServiceExport says that its
// exportedLabels and exportedAnnotations, which took the bytes its value
// says, were more than an import carries, and were not held. The caches
// drop every annotation of a ServiceExport before they call CutExported:
// no member sets it.
const AnnotationExportedCut = api.GroupName + "/exported-metadata-cut"

// CutExported keeps of e's exportedLabels and exportedAnnotations what an
// import may carry: the keys it carries, when they take at most
// MaxExportedMetadata; else none, and marks e with AnnotationExportedCut.
func CutExported(e *mcsv1b1.ServiceExport) {
	labels, annotations := allowedKeys(e.Spec.ExportedLabels), allowedKeys(e.Spec.ExportedAnnotations)
	n := api.MetadataBytes(labels) + api.MetadataBytes(annotations)
	if n <= MaxExportedMetadata {
		e.Spec.ExportedLabels, e.Spec.ExportedAnnotations = labels, annotations
		return
	}
	e.Spec.ExportedLabels, e.Spec.ExportedAnnotations = nil, nil
	if e.Annotations == nil {
		e.Annotations = map[string]string{}
	}
	e.Annotations[AnnotationExportedCut] = strconv.Itoa(n)
}

// exportedBytes is what e's exportedLabels and exportedAnnotations that an
// import would carry take, or took before they were cut.
func exportedBytes(e *mcsv1b1.ServiceExport) int {
	if n, err := strconv.Atoi(e.Annotations[AnnotationExportedCut]); err == nil {
		return n
	}
	return api.MetadataBytes(allowedKeys(e.Spec.ExportedLabels)) + api.MetadataBytes(allowedKeys(e.Spec.ExportedAnnotations))
}

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
