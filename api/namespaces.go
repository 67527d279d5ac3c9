package api

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseNamespaces parses a comma-separated list of namespaces, as
// AnnotationExportNamespaces and the controller's namespace flags hold
// them; "" is none.
func ParseNamespaces(list string) ([]string, error) {
	out := []string{}
	for ns := range strings.SplitSeq(list, ",") {
		ns = strings.TrimSpace(ns)
		if ns == "" {
			continue
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("namespace %q: %s", ns, errs[0])
		}
		out = append(out, ns)
	}
	return out, nil
}
