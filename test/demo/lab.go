package main

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// The lab's clusters (the contexts of its kubeconfig) and what the story
// puts in them.
const (
	hub     = "hub"
	member1 = "member1"
	member2 = "member2"
	member3 = "member3"

	namespace = "demo"
	svcName   = "serve"
	// podPort is where serve's pods listen, servicePort serve's port
	// (manifests/serve.yaml), which clients call: one number, so that the
	// step with answer endpoints may answer pod addresses at all
	// (plugin/mcs/README.md, Ports).
	podPort     = servicePort
	servicePort = 80
)

var (
	members = []string{member1, member2, member3}
	// The names a pod in member2 calls.
	nativeName     = svcName + "." + namespace + ".svc.cluster.local"
	clustersetName = svcName + "." + namespace + ".svc.clusterset.local"
	// podSelector selects serve's pods (manifests/serve.yaml).
	podSelector = "app=" + svcName
	mcsGVR      = schema.GroupVersionResource{Group: api.GroupName, Version: "v1alpha1", Resource: "multiclusterservices"}
)

// clusters are the clients of the lab's clusters.
type clusters struct {
	kube   map[string]kubernetes.Interface
	mcs    map[string]mcsclient.Interface // the members' MCS API
	hubDyn dynamic.Interface
}

func newClusters(kubeconfig string) (*clusters, error) {
	c := &clusters{kube: map[string]kubernetes.Interface{}, mcs: map[string]mcsclient.Interface{}}
	for _, name := range append([]string{hub}, members...) {
		cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: name}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("context %s of %s: %w", name, kubeconfig, err)
		}
		cfg.UserAgent = "make-demo"
		if c.kube[name], err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
		if name == hub {
			c.hubDyn, err = dynamic.NewForConfig(cfg)
		} else {
			c.mcs[name], err = mcsclient.NewForConfig(cfg)
		}
		if err != nil {
			return nil, err
		}
	}
	return c, nil
}

// writeKubeconfig writes the contexts of the lab's kubeconfig src to dst,
// the first of them current: mcs-controller's --kubeconfig (the hub) and
// --clusters-kubeconfig (every context a member).
func writeKubeconfig(src, dst string, contexts ...string) error {
	cfg, err := clientcmd.LoadFromFile(src)
	if err != nil {
		return err
	}
	for name := range cfg.Contexts {
		if !slices.Contains(contexts, name) {
			delete(cfg.Contexts, name)
		}
	}
	cfg.CurrentContext = contexts[0]
	return clientcmd.WriteToFile(*cfg, dst)
}

// readyIPs is the sorted addresses of the ready pods of clusters.
func (c *clusters) readyIPs(ctx context.Context, clusters ...string) ([]string, error) {
	var ips []string
	for _, cl := range clusters {
		list, err := c.kube[cl].CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
		if err != nil {
			return nil, fmt.Errorf("%s: listing pods: %w", cl, err)
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.DeletionTimestamp == nil && podReady(p) {
				ips = append(ips, p.Status.PodIP)
			}
		}
	}
	return sortIPs(ips), nil
}

func podReady(p *corev1.Pod) bool {
	if p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func sortIPs(ips []string) []string {
	slices.SortFunc(ips, func(a, b string) int { return netip.MustParseAddr(a).Compare(netip.MustParseAddr(b)) })
	return ips
}

// converged is nil once the controller has done its part for serve as the
// MultiClusterService says, with strategy, served by providers: the
// MultiClusterService's conditions are True for its current generation,
// and member2 holds derived-serve with ClusterIPs, the ServiceImport with
// those IPs and the strategy, and imported slices whose ready addresses
// are exactly the providers' ready pods.
func (c *clusters) converged(ctx context.Context, strategy api.Strategy, providers ...string) error {
	u, err := c.hubDyn.Resource(mcsGVR).Namespace(namespace).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	var m v1alpha1.MultiClusterService
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
		return fmt.Errorf("hub: MultiClusterService %s: %w", svcName, err)
	}
	if len(m.Status.Conditions) == 0 {
		return fmt.Errorf("hub: MultiClusterService %s has no conditions yet", svcName)
	}
	for _, cond := range m.Status.Conditions {
		if cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != m.Generation {
			return fmt.Errorf("hub: MultiClusterService %s: %s=%s (%s: %s) for generation %d of %d",
				svcName, cond.Type, cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration, m.Generation)
		}
	}
	derived, err := c.kube[member2].CoreV1().Services(namespace).Get(ctx, api.DerivedPrefix+svcName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("member2: %w", err)
	}
	imp, err := c.mcs[member2].MulticlusterV1beta1().ServiceImports(namespace).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("member2: %w", err)
	}
	if got := imp.Annotations[api.AnnotationStrategy]; got != string(strategy) {
		return fmt.Errorf("member2: ServiceImport %s has strategy %q, want %q", svcName, got, strategy)
	}
	if len(imp.Spec.IPs) == 0 || !slices.Equal(sortIPs(slices.Clone(imp.Spec.IPs)), sortIPs(slices.Clone(derived.Spec.ClusterIPs))) {
		return fmt.Errorf("member2: ServiceImport %s has IPs %v, derived Service %v", svcName, imp.Spec.IPs, derived.Spec.ClusterIPs)
	}
	want, err := c.readyIPs(ctx, providers...)
	if err != nil {
		return err
	}
	got, err := c.importedIPs(ctx)
	if err != nil {
		return err
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("member2: imported slices have ready addresses %v, want those of %v's pods %v", got, providers, want)
	}
	return nil
}

// importedIPs is the sorted ready addresses of member2's imported slices
// of serve.
func (c *clusters) importedIPs(ctx context.Context) ([]string, error) {
	list, err := c.kube[member2].DiscoveryV1().EndpointSlices(namespace).List(ctx,
		metav1.ListOptions{LabelSelector: api.ImportedSelector(svcName)})
	if err != nil {
		return nil, fmt.Errorf("member2: %w", err)
	}
	var ips []string
	for _, s := range list.Items {
		for _, ep := range s.Endpoints {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ips = append(ips, ep.Addresses...)
			}
		}
	}
	return sortIPs(ips), nil
}
