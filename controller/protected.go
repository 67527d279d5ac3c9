package controller

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Services that are never exported unless the operator allows them
// (--allow-export): default/kubernetes is the API server, and exporting it
// would send other clusters' in-cluster tokens to whichever cluster
// provides it; kube-system and kube-public hold the clusters' own
// machinery; the controller's namespace, its member Secrets.
var protectedNamespaces = []string{metav1.NamespaceSystem, metav1.NamespacePublic}

// protected says why the service must not be exported, or "".
func (c *Controller) protected(namespace, name string) string {
	var why string
	switch {
	case namespace == metav1.NamespaceDefault && name == "kubernetes":
		why = "default/kubernetes is the API server's Service: other clusters' clients would send their in-cluster tokens to whichever cluster provides it"
	case slices.Contains(protectedNamespaces, namespace):
		why = fmt.Sprintf("namespace %s holds the clusters' own machinery", namespace)
	case namespace == c.opts.Namespace:
		why = fmt.Sprintf("namespace %s is the controller's own", namespace)
	default:
		return ""
	}
	if slices.Contains(c.opts.AllowExport, namespace) || slices.Contains(c.opts.AllowExport, namespace+"/"+name) {
		return ""
	}
	return fmt.Sprintf("%s/%s is not exported: %s; an operator allows it with mcs-controller --allow-export=%s/%s", namespace, name, why, namespace, name)
}

// ParseAllowExport checks a value of --allow-export: comma-separated
// NAMESPACE or NAMESPACE/NAME.
func ParseAllowExport(value string) ([]string, error) {
	var out []string
	for entry := range strings.SplitSeq(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		namespace, name, named := strings.Cut(entry, "/")
		errs := validation.IsDNS1123Label(namespace)
		if named {
			errs = append(errs, validation.IsDNS1035Label(name)...)
		}
		if len(errs) > 0 {
			return nil, fmt.Errorf("--allow-export %q: want NAMESPACE or NAMESPACE/NAME: %s", entry, errs[0])
		}
		out = append(out, entry)
	}
	return out, nil
}
