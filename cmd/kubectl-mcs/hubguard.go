package main

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// clients are the hub's and the member's, as the flags name them.
func (o *writeOptions) clients() (kubernetes.Interface, *memberClients, error) {
	hub, err := o.hub()
	if err != nil {
		return nil, nil, err
	}
	m, err := memberOf(o.flags)
	if err != nil {
		return nil, nil, err
	}
	return hub, m, nil
}

// clusters are the hub's and the member's clients, once they are sure to
// reach two clusters.
func (o *writeOptions) clusters(ctx context.Context) (kubernetes.Interface, *memberClients, error) {
	hub, m, err := o.clients()
	if err != nil {
		return nil, nil, err
	}
	if _, err := notTheHub(ctx, hub, m.kube, *o.flags.Context); err != nil {
		return nil, nil, err
	}
	return hub, m, nil
}

// notTheHub refuses a member context that reaches the hub's API server:
// what join and unjoin write into a member, and delete there (the
// controller's own ServiceAccount among it), must never land on the hub.
// It returns the hub's identity.
func notTheHub(ctx context.Context, hub, member kubernetes.Interface, memberContext string) (types.UID, error) {
	hubID, err := clusterID(ctx, hub)
	if err != nil {
		return "", fmt.Errorf("the hub: %w", err)
	}
	memberID, err := clusterID(ctx, member)
	if err != nil {
		return "", fmt.Errorf("the member (context %q): %w", memberContext, err)
	}
	if hubID == memberID {
		return "", fmt.Errorf("context %q reaches the hub's API server (both clusters' namespace kube-system is %s): name the member's own context with --context or --member-context CLUSTER=CONTEXT; nothing was changed", memberContext, hubID)
	}
	return hubID, nil
}

// clusterID tells a cluster apart whatever address or credentials reach it:
// the UID of its namespace kube-system, which every cluster has and no two
// share (the cluster ID of the MCS API's ClusterProperty, KEP-2149).
func clusterID(ctx context.Context, kube kubernetes.Interface) (types.UID, error) {
	ns, err := kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("cannot tell which cluster it is, by its namespace kube-system: %w", err)
	}
	return ns.UID, nil
}
