package decide

import (
	"cmp"
	"slices"
)

// Preferred is what the failover order picks of ss, sorted by the cluster
// cluster gives: the run of the first cluster in order that has any, else
// those of the clusters order does not name; ss itself without an order.
// It allocates only in the last case.
func Preferred[T any](ss []T, order []string, cluster func(T) string) []T {
	if len(order) == 0 {
		return ss
	}
	for _, c := range order {
		if of := ofCluster(ss, c, cluster); len(of) > 0 {
			return of
		}
	}
	var rest []T
	for _, s := range ss {
		if !slices.Contains(order, cluster(s)) {
			rest = append(rest, s)
		}
	}
	return rest
}

// ofCluster is the run of ss (sorted by cluster) from cluster c.
func ofCluster[T any](ss []T, c string, cluster func(T) string) []T {
	i, _ := slices.BinarySearchFunc(ss, c, func(s T, c string) int { return cmp.Compare(cluster(s), c) })
	j := i
	for j < len(ss) && cluster(ss[j]) == c {
		j++
	}
	return ss[i:j]
}

// FirstListed is the provider whose own VIP (its provider Service's, with
// answer vip) LocalFirst answers once it fell back to VIP_set: the first
// cluster in order with an endpoint among the remote ones, the fresh (ss
// of each sorted by cluster), else the stale. "" when none in order has
// one: VIP_set then spreads over the clusters order does not name, as
// Preferred's endpoints do.
func FirstListed[T any](fresh, stale []T, order []string, cluster func(T) string) string {
	remote := fresh
	if len(remote) == 0 {
		remote = stale
	}
	p := Preferred(remote, order, cluster)
	if len(p) == 0 || !slices.Contains(order, cluster(p[0])) {
		return ""
	}
	return cluster(p[0])
}
