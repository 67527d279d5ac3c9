package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// derived-<svc> in a consumption cluster: the Service its imported slices
// belong to, whose ClusterIPs are the ServiceImport's VIPs, and which
// carries the import's ports and traffic policies to kube-proxy.

// derivedService reports whether s is a derived Service: the controller
// labels those, and only those, with the service they stand for (before
// that label, it gave them a ServiceImport as owner, as it still does when
// the import is its own).
func derivedService(s *corev1.Service) bool {
	return s.Labels[mcsv1b1.LabelServiceName] != "" ||
		slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == mcsv1b1.ServiceImportKindName })
}

// errLeftAlone: a Service of the user's holds the name derived-<name>.
var errLeftAlone = errors.New("left alone, and no slices imported")

// ensureDerived makes derived-<name>: selector-less, owned by the import
// when the import is the controller's, with the import's ports and IP
// families; headless when the import is.
func (w *writer) ensureDerived(ctx context.Context, name string, want *desired.Import, imp *mcsv1b1.ServiceImport) (*corev1.Service, error) {
	labels := map[string]string{api.LabelManagedBy: api.ManagedBy, mcsv1b1.LabelServiceName: name, api.LabelBucket: shards.Label(w.namespace, name)}
	return w.ensureImportService(ctx, api.DerivedPrefix+name, labels, want, w.importOwner(imp))
}

// ensureImportService makes the selector-less Service sname, labelled
// labels and owned by owner, that carries want's ports, families and
// traffic policies to kube-proxy: derived-<svc>, or a provider Service
// (providers.go).
func (w *writer) ensureImportService(ctx context.Context, sname string, labels map[string]string, want *desired.Import, owner []metav1.OwnerReference) (*corev1.Service, error) {
	have := w.service(sname)
	if have != nil && !ours(have) {
		return nil, fmt.Errorf("Service %s/%s exists and is not managed by %s: %w", w.namespace, sname, api.ManagedBy, errLeftAlone)
	}
	ports := make([]corev1.ServicePort, 0, len(want.Ports))
	for _, p := range want.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port)})
	}
	if have == nil {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: sname, Namespace: w.namespace, Labels: labels, OwnerReferences: owner},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, Ports: ports,
				IPFamilyPolicy: want.IPFamilyPolicy, IPFamilies: slices.Clone(want.IPFamilies),
			},
		}
		setTraffic(s, derivedTraffic(want.Traffic))
		if want.Headless {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		return w.createService(ctx, s)
	}
	families, recreate := setFamilies(have.DeepCopy(), want)
	if desired.IsHeadless(have) != want.Headless || recreate { // clusterIP and the first family are immutable
		if err := w.deleteService(ctx, have); err != nil {
			return nil, err
		}
		return w.ensureImportService(ctx, sname, labels, want, owner)
	}
	// A propagated Service of the name (a MultiClusterService
	// derived-<name>'s) is taken over: its selector goes, or the
	// endpoints of pods here would join the imported ones.
	if !families && samePorts(have.Spec.Ports, ports) && equality.Semantic.DeepEqual(have.OwnerReferences, owner) && hasLabels(have, labels) &&
		desired.TrafficOf(have).Same(derivedTraffic(want.Traffic)) && have.Spec.Selector == nil {
		return have, nil
	}
	return w.updateService(ctx, have, func(s *corev1.Service) {
		setFamilies(s, want)
		s.Spec.Ports, s.OwnerReferences, s.Spec.Selector = ports, owner, nil
		setTraffic(s, derivedTraffic(want.Traffic))
		setLabels(s, labels)
	})
}

// setFamilies makes s's IP families what want asks (desired/families.go),
// and reports whether it changed them, or whether s must be made anew
// because its first family is another. The API server keeps the families
// a dual-stack policy gave; only the policy is compared then.
func setFamilies(s *corev1.Service, want *desired.Import) (changed, recreate bool) {
	have := ptr.Deref(s.Spec.IPFamilyPolicy, "")
	switch {
	case want.IPFamilyPolicy == nil:
		return false, false
	case *want.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack:
		if have == corev1.IPFamilyPolicyPreferDualStack || have == corev1.IPFamilyPolicyRequireDualStack {
			return false, false
		}
		s.Spec.IPFamilyPolicy = want.IPFamilyPolicy
		return true, false
	case len(s.Spec.IPFamilies) > 0 && s.Spec.IPFamilies[0] != want.IPFamilies[0]:
		return false, true
	case have == corev1.IPFamilyPolicySingleStack && len(s.Spec.IPFamilies) == 1:
		return false, false
	}
	// Single-stack again: the API server keeps the first address only.
	s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = want.IPFamilyPolicy, slices.Clone(want.IPFamilies)
	s.Spec.ClusterIPs = s.Spec.ClusterIPs[:min(1, len(s.Spec.ClusterIPs))]
	return true, false
}

// setTraffic makes s handle its traffic as t says, so that kube-proxy does
// what the import says.
func setTraffic(s *corev1.Service, t desired.Traffic) {
	s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = t.SessionAffinity, t.SessionAffinityConfig.DeepCopy()
	s.Spec.InternalTrafficPolicy, s.Spec.TrafficDistribution = t.InternalTrafficPolicy, t.TrafficDistribution
}

// derivedTraffic is how derived-<svc> handles the traffic an import says t
// of: as t says, but for internalTrafficPolicy Local, which kube-proxy
// follows by routing to endpoints on the client's own node only. Imported
// endpoints have no node here, so every connection would be dropped:
// derived-<svc> routes Cluster-wide instead, and the import keeps Local.
func derivedTraffic(t desired.Traffic) desired.Traffic {
	if ptr.Deref(t.InternalTrafficPolicy, "") == corev1.ServiceInternalTrafficPolicyLocal {
		t.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	return t
}

// importOwner is the owner of what the controller makes for an import of
// its own: deleting the import collects them. Another's import (the user's,
// another MCS implementation's) owns nothing of the controller's, so that
// deleting it never takes the controller's objects with it; those are
// deleted by the controller.
func (w *writer) importOwner(imp *mcsv1b1.ServiceImport) []metav1.OwnerReference {
	if !ours(imp) {
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion: w.m.ImportVersion(),
		Kind:       mcsv1b1.ServiceImportKindName,
		Name:       imp.Name,
		UID:        imp.UID,
	}}
}

// samePorts compares what a Service's port says to clients; the API server
// fills in the rest.
func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Protocol == y.Protocol && x.Port == y.Port &&
			equality.Semantic.DeepEqual(x.AppProtocol, y.AppProtocol) &&
			(y.TargetPort == intstr.IntOrString{} || x.TargetPort == y.TargetPort)
	})
}

// removeDerived deletes derived-<name> if it is the controller's.
func (w *writer) removeDerived(ctx context.Context, name string) error {
	if d := w.service(api.DerivedPrefix + name); d != nil && ours(d) && derivedService(d) {
		return w.deleteService(ctx, d)
	}
	return nil
}
