package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// world is what diagnose read of one service: the hub's
// MultiClusterService and every member's objects. Checks are functions of
// it, so that each can be tested on fakes.
type world struct {
	namespace, service string
	mcsvc              *v1alpha1.MultiClusterService // nil: none on the hub
	members            []*memberState                // sorted by cluster
	hub                *hubState                     // the controller's objects on the hub; nil: not read
}

// memberState is what one member holds of the service, and its clients for
// the checks that ask it (SubjectAccessReviews, pod proxy).
type memberState struct {
	cluster     string
	err         error // it could not be read: the only check is reachability
	kube        kubernetes.Interface
	service     *corev1.Service
	derived     *corev1.Service
	own         []discoveryv1.EndpointSlice // its own slices of the service
	imported    []discoveryv1.EndpointSlice // the controller's copies here
	export      *mcsv1b1.ServiceExport
	imp         *mcsv1b1.ServiceImport
	leases      map[string]*coordinationv1.Lease // source-<provider>, by provider
	coredns     *appsv1.Deployment               // kube-system/coredns
	corefile    *string                          // its ConfigMap's Corefile; nil when there is none
	credentials *CredentialReport                // its hub Secret's; nil with --members
	// clusterProperty is ClusterProperty cluster.clusterset.k8s.io's
	// spec.value, read when the mcs stanza names no cluster; nil: none.
	clusterProperty *string
	policies        []networkingv1.NetworkPolicy // in the service's namespace
	pods            []corev1.Pod                 // the Service's pods, when a policy is there to select them
	nodeLocal       *nodeLocalDNS                // NodeLocal DNSCache; nil: not installed
	// unread are the optional reads that failed (forbidden, say), by what
	// they read: their checks are unknown, the member is still read.
	unread map[string]error
}

// member is the state of cluster, or the state of a member that could not
// be read.
func (w *world) member(cluster string) *memberState {
	for _, m := range w.members {
		if m.cluster == cluster {
			return m
		}
	}
	return nil
}

// readMember reads what cluster holds of the service through its clients.
func readMember(ctx context.Context, cluster, ns, svc string, kube kubernetes.Interface, mcs mcsclient.Interface, dyn dynamic.Interface) *memberState {
	m := &memberState{cluster: cluster, kube: kube, leases: map[string]*coordinationv1.Lease{}, unread: map[string]error{}}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		m.err = err
		return m
	}
	for _, read := range []func(context.Context, string, string, mcsclient.Interface) error{m.readServices, m.readSlices, m.readMCS, m.readCoreDNS} {
		if err := read(ctx, ns, svc, mcs); err != nil {
			m.err = err
			return m
		}
	}
	m.readClusterProperty(ctx, dyn)
	m.readPolicies(ctx, ns)
	m.readNodeLocal(ctx)
	return m
}

// optional is a Get's object, or nil when there is none.
func optional[T any](obj *T, err error) (*T, error) {
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return obj, nil
}

func (m *memberState) readServices(ctx context.Context, ns, svc string, _ mcsclient.Interface) (err error) {
	services := m.kube.CoreV1().Services(ns)
	if m.service, err = optional(services.Get(ctx, svc, metav1.GetOptions{})); err != nil {
		return err
	}
	m.derived, err = optional(services.Get(ctx, api.DerivedPrefix+svc, metav1.GetOptions{}))
	return err
}

func (m *memberState) readSlices(ctx context.Context, ns, svc string, _ mcsclient.Interface) error {
	slices := m.kube.DiscoveryV1().EndpointSlices(ns)
	own, err := slices.List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
	if err != nil {
		return err
	}
	imported, err := slices.List(ctx, metav1.ListOptions{LabelSelector: api.ImportedSelector(svc)})
	if err != nil {
		return err
	}
	m.own, m.imported = own.Items, imported.Items
	return nil
}

// readMCS reads the export, the import and the Leases of the import's
// providers. A member that does not serve the MCS API has none of them:
// crdCheck says so.
func (m *memberState) readMCS(ctx context.Context, ns, svc string, mcs mcsclient.Interface) (err error) {
	v := mcs.MulticlusterV1beta1()
	if m.export, err = optional(v.ServiceExports(ns).Get(ctx, svc, metav1.GetOptions{})); err != nil && !notServed(err) {
		return err
	}
	if m.imp, err = optional(v.ServiceImports(ns).Get(ctx, svc, metav1.GetOptions{})); err != nil && !notServed(err) {
		return err
	}
	if m.imp == nil {
		return nil
	}
	for _, c := range m.imp.Status.Clusters {
		l, err := optional(m.kube.CoordinationV1().Leases(api.LeaseNamespace).Get(ctx, api.LeasePrefix+c.Cluster, metav1.GetOptions{}))
		if err != nil {
			return err
		}
		m.leases[c.Cluster] = l
	}
	return nil
}

// notServed is the error of a resource the API server does not serve.
func notServed(err error) bool {
	return apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err)
}

// readCoreDNS reads CoreDNS's Deployment and Corefile, where kubeadm and
// deploy/overlays put them.
func (m *memberState) readCoreDNS(ctx context.Context, _, _ string, _ mcsclient.Interface) (err error) {
	if m.coredns, err = optional(m.kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})); err != nil {
		return fmt.Errorf("Deployment kube-system/coredns: %w", err)
	}
	cm, err := optional(m.kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{}))
	if err != nil {
		return fmt.Errorf("ConfigMap kube-system/coredns: %w", err)
	}
	if cm != nil {
		c := cm.Data["Corefile"]
		m.corefile = &c
	}
	return nil
}

// providers are the clusters that should provide the service: the
// MultiClusterService's provision clusters, else every member with the
// Service (with a MultiClusterService) or with a ServiceExport (without).
func (w *world) providers() []string {
	if w.mcsvc != nil && len(w.mcsvc.Spec.ServiceProvisionClusters) > 0 {
		return v1alpha1.Names(w.mcsvc.Spec.ServiceProvisionClusters)
	}
	var out []string
	for _, m := range w.members {
		if m.err == nil && (m.export != nil || w.mcsvc != nil && m.service != nil) {
			out = append(out, m.cluster)
		}
	}
	return out
}

// consumers are the clusters that should import the service: the
// MultiClusterService's consumption clusters, else every member.
func (w *world) consumers() []string {
	if w.mcsvc != nil && len(w.mcsvc.Spec.ServiceConsumptionClusters) > 0 {
		return v1alpha1.Names(w.mcsvc.Spec.ServiceConsumptionClusters)
	}
	var out []string
	for _, m := range w.members {
		out = append(out, m.cluster)
	}
	return out
}

// strategy is the strategy the consumers' imports should carry: the
// MultiClusterService's (RemoteAndLocal when it says none), or "" when
// there is none and native names are off.
func (w *world) strategy() string {
	switch {
	case w.mcsvc == nil:
		return ""
	case w.mcsvc.Spec.Strategy == "":
		return string(api.RemoteAndLocal)
	}
	return string(w.mcsvc.Spec.Strategy)
}
