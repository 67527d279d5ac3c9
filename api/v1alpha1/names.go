package v1alpha1

import "slices"

// Names is the clusters of l as strings, sorted, each once: the form the
// controller and kubectl mcs compare cluster lists in.
func Names(l []ClusterName) []string {
	out := make([]string, 0, len(l))
	for _, c := range l {
		out = append(out, string(c))
	}
	slices.Sort(out)
	return slices.Compact(out)
}
