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
// reach two clusters, or the hub twice with --hub-as-member (isHub).
func (o *writeOptions) clusters(ctx context.Context) (hub kubernetes.Interface, m *memberClients, isHub bool, err error) {
	hub, m, err = o.clients()
	if err != nil {
		return nil, nil, false, err
	}
	if _, isHub, err = notTheHub(ctx, hub, m.kube, *o.flags.Context, o.hubAsMember); err != nil {
		return nil, nil, false, err
	}
	return hub, m, isHub, nil
}

// notTheHub refuses a member context that reaches the hub's API server
// unless allowed (--hub-as-member): what join and unjoin write into a
// member, and delete there, must land on the hub only when the operator
// means it. The member account is not the controller's (deploy/member), so
// a hub joined as a member hands its Secret none of the controller's
// rights. It returns the hub's identity, and whether the member is the hub.
func notTheHub(ctx context.Context, hub, member kubernetes.Interface, memberContext string, allowed bool) (types.UID, bool, error) {
	hubID, err := clusterID(ctx, hub)
	if err != nil {
		return "", false, fmt.Errorf("the hub: %w", err)
	}
	memberID, err := clusterID(ctx, member)
	if err != nil {
		return "", false, fmt.Errorf("the member (context %q): %w", memberContext, err)
	}
	if hubID == memberID && !allowed {
		return "", false, fmt.Errorf("context %q reaches the hub's API server (both clusters' namespace kube-system is %s): name the member's own context with --context or --member-context CLUSTER=CONTEXT, or give --hub-as-member to make the hub a member too; nothing was changed", memberContext, hubID)
	}
	return hubID, hubID == memberID, nil
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
