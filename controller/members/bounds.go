package members

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// A member may be bounded to the namespaces it exports from, so that a
// compromised member cannot publish endpoints under the name of a service
// in any other namespace, nor make that namespace in every consumer. The
// operator bounds it with --export-namespaces, and a member Secret with
// its annotation api.AnnotationExportNamespaces; with both, it may export
// only from the namespaces both allow.

// bound is one list of namespaces a member may export from, and who set it.
type bound struct {
	namespaces []string
	by         string
}

// ParseExportNamespaces parses one value of --export-namespaces,
// CLUSTER=NAMESPACE[,NAMESPACE...] (CLUSTER= for none), into bounds.
func ParseExportNamespaces(bounds map[string][]string, value string) error {
	cluster, list, ok := strings.Cut(value, "=")
	if !ok {
		return fmt.Errorf("%q: want CLUSTER=NAMESPACE[,NAMESPACE...]", value)
	}
	if errs := validation.IsDNS1123Label(cluster); len(errs) > 0 {
		return fmt.Errorf("%q: cluster %q: %s", value, cluster, errs[0])
	}
	if _, dup := bounds[cluster]; dup {
		return fmt.Errorf("%q: cluster %s is bounded twice", value, cluster)
	}
	namespaces, err := api.ParseNamespaces(list)
	if err != nil {
		return fmt.Errorf("%q: %w", value, err)
	}
	bounds[cluster] = namespaces
	return nil
}

// secretBound is the bound a member Secret's annotation sets, if any.
func secretBound(annotations map[string]string, source string) (*bound, error) {
	list, ok := annotations[api.AnnotationExportNamespaces]
	if !ok {
		return nil, nil
	}
	namespaces, err := api.ParseNamespaces(list)
	if err != nil {
		return nil, refuse(reasonInvalid, "%s: annotation %s: %v", source, api.AnnotationExportNamespaces, err)
	}
	return &bound{namespaces, "the annotation " + api.AnnotationExportNamespaces + " of its " + source}, nil
}

// NotAllowed says why the member may not export from namespace, or "".
func (m *Member) NotAllowed(namespace string) string {
	for _, b := range m.bounds {
		if !slices.Contains(b.namespaces, namespace) {
			only := "from no namespace"
			if len(b.namespaces) > 0 {
				only = "only from " + strings.Join(b.namespaces, ", ")
			}
			return fmt.Sprintf("%s may export %s (%s): it does not provide %s's services", m.Name, only, b.by, namespace)
		}
	}
	return ""
}

// Bounded reports whether the operator or the member's Secret bounds the
// namespaces it exports from.
func (m *Member) Bounded() bool { return len(m.bounds) > 0 }
