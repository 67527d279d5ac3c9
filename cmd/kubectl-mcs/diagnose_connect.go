package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// What diagnose can tell of a connection without making one: someone has
// a ready endpoint, the imported endpoints carry the ports derived-<svc>
// routes, and no NetworkPolicy in a provider shuts other clusters out. A
// real connection is kubectl mcs verify's (docs/troubleshooting.md).

// readPolicies reads the NetworkPolicies of the service's namespace, and
// the Service's pods when there are any to select.
func (m *memberState) readPolicies(ctx context.Context, ns string) {
	if m.service == nil || len(m.service.Spec.Selector) == 0 {
		return // no pods of its own to guard
	}
	list, err := m.kube.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		m.unread["networkpolicies"] = fmt.Errorf("NetworkPolicies in %s: %w", ns, err)
		return
	}
	if m.policies = list.Items; len(m.policies) == 0 {
		return
	}
	pods, err := m.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(m.service.Spec.Selector).String()})
	if err != nil {
		m.unread["networkpolicies"] = fmt.Errorf("pods in %s: %w", ns, err)
		return
	}
	m.pods = pods.Items
}

// readyEndpointsCheck: some provider's Service has a ready endpoint;
// otherwise every name resolves to nothing that answers.
func readyEndpointsCheck(w *world) []Check {
	name := "some provider has a ready endpoint"
	var counts []string
	total := 0
	for _, p := range w.providers() {
		m := w.member(p)
		if m == nil || m.err != nil || m.service == nil {
			continue // its reachability check, or its export's NoService, says so
		}
		n := 0
		for i := range m.own {
			n += ready(&m.own[i])
		}
		total += n
		counts = append(counts, fmt.Sprintf("%s %d", p, n))
	}
	switch {
	case len(counts) == 0:
		return nil
	case total == 0:
		return []Check{fail(linkExport, "", name, "no provider has a ready endpoint (ready: "+strings.Join(counts, ", ")+")",
			"the Service's pods are not Ready in any provider: kubectl --context <provider> -n "+w.namespace+" get endpointslices -l kubernetes.io/service-name="+w.service+", and describe its pods")}
	}
	return []Check{pass(linkExport, "", name+" (ready: "+strings.Join(counts, ", ")+")")}
}

// portsCheck: every imported slice with ready endpoints carries each port
// of derived-<svc> (the import's, for a headless one), by name and
// protocol: kube-proxy sends a port of derived-<svc> only to the slice
// ports of its name.
func portsCheck(w *world, m *memberState) []Check {
	name := "imported endpoints carry the ports of " + api.DerivedPrefix + w.service
	type port struct {
		name     string
		protocol corev1.Protocol
		number   int32
	}
	var want []port
	if m.derived != nil {
		for _, p := range m.derived.Spec.Ports {
			want = append(want, port{p.Name, cmp.Or(p.Protocol, corev1.ProtocolTCP), p.Port})
		}
	} else {
		for _, p := range m.imp.Spec.Ports {
			want = append(want, port{p.Name, cmp.Or(p.Protocol, corev1.ProtocolTCP), p.Port})
		}
	}
	var problems []string
	for _, s := range m.imported {
		if ready(&s) == 0 {
			continue
		}
		for _, p := range want {
			if !slices.ContainsFunc(s.Ports, func(sp discoveryv1.EndpointPort) bool {
				return ptr.Deref(sp.Name, "") == p.name && ptr.Deref(sp.Protocol, corev1.ProtocolTCP) == p.protocol && ptr.Deref(sp.Port, 0) != 0
			}) {
				problems = append(problems, fmt.Sprintf("%s (of %s) carries no port %q (%d/%s): its %d ready endpoints get none of that port's connections",
					s.Name, s.Labels[mcsv1b1.LabelSourceCluster], p.name, p.number, p.protocol, ready(&s)))
			}
		}
	}
	if len(problems) == 0 {
		return []Check{pass(linkConnect, m.cluster, name)}
	}
	return []Check{fail(linkConnect, m.cluster, name, strings.Join(problems, "; "),
		"the providers' Services must define the port as the import does, by name, protocol and number (its ServiceExport's Conflict says which differs: docs/troubleshooting.md, \"Condition Conflict\")")}
}

// policyCheck: when NetworkPolicies select the service's pods in a
// provider, one of them admits connections from outside the cluster. A
// NetworkPolicy's podSelector and namespaceSelector peers are this
// cluster's pods, so only a rule without peers, or an ipBlock (of the
// other clusters' pod CIDRs, which diagnose does not know) admits a remote
// pod; a namespaceSelector is given the benefit of the doubt, since a
// network that joins clusters (Cilium's ClusterMesh) may match remote pods
// by it. It is a warning: diagnose cannot tell the CIDRs.
func policyCheck(w *world, m *memberState) []Check {
	name := "NetworkPolicies in " + w.namespace + " admit other clusters to " + w.service + "'s pods"
	if m.service == nil || len(m.service.Spec.Selector) == 0 {
		return nil // no pods of its own here (readPolicies read none)
	}
	if err, ok := m.unread["networkpolicies"]; ok {
		return []Check{unknown(linkConnect, m.cluster, name, err.Error(), "")}
	}
	var blocking []string
	for _, p := range m.policies {
		if !selectsAny(&p, m.pods) || !guardsIngress(&p) {
			continue
		}
		if admitsRemote(&p, m.service) {
			return []Check{pass(linkConnect, m.cluster, name+": "+p.Name+" does")}
		}
		blocking = append(blocking, p.Name)
	}
	if len(blocking) == 0 {
		return []Check{pass(linkConnect, m.cluster, name)}
	}
	return []Check{warn(linkConnect, m.cluster, name,
		"NetworkPolicy "+strings.Join(blocking, ", ")+" selects its pods and admits nothing from outside the cluster to its ports (no ingress rule without peers, with an ipBlock or a namespaceSelector): connections from other clusters are dropped",
		"add to "+blocking[0]+" an ingress rule from the other clusters' pod CIDRs (ipBlock) to the Service's target ports (docs/troubleshooting.md, \"Connections to a multi-cluster service time out\")")}
}

// selectsAny: p's podSelector matches one of pods.
func selectsAny(p *networkingv1.NetworkPolicy, pods []corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		return false // the API server validates it; one it let through selects nothing diagnose can tell
	}
	return slices.ContainsFunc(pods, func(pod corev1.Pod) bool { return sel.Matches(labels.Set(pod.Labels)) })
}

// guardsIngress: p restricts ingress (policyTypes Ingress, or none given).
func guardsIngress(p *networkingv1.NetworkPolicy) bool {
	return len(p.Spec.PolicyTypes) == 0 || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

// admitsRemote: a rule of p admits a peer outside the cluster to a port of
// svc.
func admitsRemote(p *networkingv1.NetworkPolicy, svc *corev1.Service) bool {
	for _, rule := range p.Spec.Ingress {
		if !admitsPort(rule.Ports, svc) {
			continue
		}
		if len(rule.From) == 0 || slices.ContainsFunc(rule.From, func(peer networkingv1.NetworkPolicyPeer) bool {
			return peer.IPBlock != nil || peer.NamespaceSelector != nil
		}) {
			return true
		}
	}
	return false
}

// admitsPort: ports (none: all) take a target port of svc. A name against
// a number cannot be told without the pods' container ports: taken.
func admitsPort(ports []networkingv1.NetworkPolicyPort, svc *corev1.Service) bool {
	if len(ports) == 0 {
		return true
	}
	for _, np := range ports {
		for _, sp := range svc.Spec.Ports {
			if ptr.Deref(np.Protocol, corev1.ProtocolTCP) != cmp.Or(sp.Protocol, corev1.ProtocolTCP) {
				continue
			}
			target := sp.TargetPort
			if target.IntValue() == 0 && target.Type == intstr.Int {
				target = intstr.FromInt32(sp.Port)
			}
			switch {
			case np.Port == nil, np.Port.Type != target.Type:
				return true
			case target.Type == intstr.String && np.Port.StrVal == target.StrVal:
				return true
			case target.Type == intstr.Int && target.IntVal >= np.Port.IntVal && target.IntVal <= ptr.Deref(np.EndPort, np.Port.IntVal):
				return true
			}
		}
	}
	return false
}
