package controller

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Services that are never exported unless the operator allows them
// (--allow-export): default/kubernetes is the API server, and exporting it
// would send other clusters' in-cluster tokens to whichever cluster
// provides it; every kube-* namespace holds the clusters' own machinery
// (kube-system, kube-public, kube-node-lease, and those add-ons make); the
// members' mcs-system, coredns-mcs's Leases; the controller's namespace,
// its member Secrets; and the namespaces the operator names
// (--protected-namespaces).

// protected says why the service must not be exported, or "".
func (c *Controller) protected(namespace, name string) string {
	var why string
	switch {
	case namespace == metav1.NamespaceDefault && name == "kubernetes":
		why = "default/kubernetes is the API server's Service: other clusters' clients would send their in-cluster tokens to whichever cluster provides it"
	case strings.HasPrefix(namespace, "kube-"):
		why = fmt.Sprintf("namespace %s holds the clusters' own machinery", namespace)
	case namespace == api.LeaseNamespace:
		why = fmt.Sprintf("namespace %s holds coredns-mcs's Leases in the members", namespace)
	case namespace == c.opts.Namespace:
		why = fmt.Sprintf("namespace %s is the controller's own", namespace)
	case slices.Contains(c.opts.Protected, namespace):
		why = fmt.Sprintf("namespace %s is protected (--protected-namespaces)", namespace)
	default:
		return ""
	}
	if slices.Contains(c.opts.AllowExport, namespace) || slices.Contains(c.opts.AllowExport, namespace+"/"+name) {
		return ""
	}
	return fmt.Sprintf("%s/%s is not exported: %s; an operator allows it with mcs-controller --allow-export=%s/%s", namespace, name, why, namespace, name)
}

// ParseProtected checks a value of --protected-namespaces:
// comma-separated namespaces.
func ParseProtected(value string) ([]string, error) {
	out, err := api.ParseNamespaces(value)
	if err != nil {
		return nil, fmt.Errorf("--protected-namespaces: %w", err)
	}
	return out, nil
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
