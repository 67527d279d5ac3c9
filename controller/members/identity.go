package members

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// A member's identity is the UID of its cluster's kube-system Namespace,
// read at its first probe that succeeds: one cluster registered under two
// names (its Secret relabelled) is recognised by it, so that the name that
// goes hands the cluster over to the one that comes (the controller's
// rename) rather than the two deleting what the other makes.

// learnIdentity reads the member's identity, once.
func (m *Member) learnIdentity(ctx context.Context) {
	if _, known := m.Identity(); known {
		return
	}
	ns, err := m.Control.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if ctx.Err() != nil {
		return // asked again at the next probe
	}
	if err != nil {
		klog.V(2).ErrorS(err, "Cannot read the member's identity (its kube-system Namespace): a rename of it is not recognised", "cluster", m.Name, "source", m.Source)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.identityKnown = true
	if err == nil {
		m.identity = ns.UID
	}
}

// Identity is the UID of the member's kube-system Namespace, and whether
// its probe has asked yet; "" when it did not tell.
func (m *Member) Identity() (types.UID, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.identity, m.identityKnown
}
