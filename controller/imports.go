package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// ServiceImports are written in the version the member serves
// (members.ImportClient).

func (w *writer) serviceImport(name string) *mcsv1b1.ServiceImport {
	return latestOf(w.track, w.key("ServiceImport", name), w.m.Import(w.namespace, name))
}

// ensureImport returns the member's ServiceImport, creating ours if there
// is none. A user's ServiceImport (the MCS API's manual import) is honoured:
// filled in, never deleted.
func (w *writer) ensureImport(ctx context.Context, name string, plan *desired.Plan) (*mcsv1b1.ServiceImport, error) {
	if imp := w.serviceImport(name); imp != nil {
		return imp, nil
	}
	imp := &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.namespace, Labels: map[string]string{api.LabelManagedBy: api.ManagedBy}},
	}
	w.setImportSpec(imp, plan, nil, "") // labels it whole
	got, err := save(w, "ServiceImport", "create", name, func() (*mcsv1b1.ServiceImport, error) {
		return w.m.ServiceImports(w.namespace).Create(ctx, imp)
	})
	if err != nil {
		return nil, err
	}
	w.notePruned(imp, got)
	return got, nil
}

// updateImport brings the import's spec (what set writes into it) and
// status.clusters up to date: one write for each of the two that differs.
func (w *writer) updateImport(ctx context.Context, imp *mcsv1b1.ServiceImport, set, setStatus func(*mcsv1b1.ServiceImport)) (*mcsv1b1.ServiceImport, error) {
	upd := imp.DeepCopy()
	set(upd)
	if !equality.Semantic.DeepEqual(upd.Spec, imp.Spec) || !maps.Equal(upd.Annotations, imp.Annotations) || !maps.Equal(upd.Labels, imp.Labels) {
		var err error
		if imp, err = w.writeImport(ctx, "update", imp, set); err != nil {
			return nil, err
		}
	}
	status := func(i *mcsv1b1.ServiceImport) {
		setStatus(i)
		w.prunedHere().dropStatus(&i.Status)
	}
	upd = imp.DeepCopy()
	status(upd)
	if equality.Semantic.DeepEqual(upd.Status, imp.Status) {
		return imp, nil
	}
	return w.writeImport(ctx, "update-status", imp, status)
}

// fillImport makes the import say what the plan provides, through the
// derived Service (derivedErr: why there is none) and the provider
// Services' VIPs (api.AnnotationProviderVIPs' value).
func (w *writer) fillImport(ctx context.Context, imp *mcsv1b1.ServiceImport, plan *desired.Plan, derived *corev1.Service, derivedErr error, providerVIPs string) (*mcsv1b1.ServiceImport, error) {
	return w.updateImport(ctx, imp, func(i *mcsv1b1.ServiceImport) { w.setImportSpec(i, plan, derived, providerVIPs) }, func(i *mcsv1b1.ServiceImport) {
		s := &i.Status
		s.Clusters = nil
		for _, c := range plan.Import.Clusters {
			s.Clusters = append(s.Clusters, mcsv1b1.ClusterStatus{Cluster: c})
		}
		s.EndpointSliceObjects = mcsv1b1.EndpointSliceObjectsAbsent
		if len(plan.Slices) > 0 {
			s.EndpointSliceObjects = mcsv1b1.EndpointSliceObjectsPresent
		}
		ready := importReady(i.Name, plan, derived, derivedErr)
		ready.ObservedGeneration = i.Generation
		meta.SetStatusCondition(&s.Conditions, ready)
	})
}

// importReady is the ServiceImport's Ready condition (mcs-api v1beta1): a
// ClusterSetIP import is ready once derived-<svc> has its VIP.
func importReady(name string, plan *desired.Plan, derived *corev1.Service, derivedErr error) metav1.Condition {
	cond := func(status metav1.ConditionStatus, reason mcsv1b1.ServiceImportConditionReason, msg string) metav1.Condition {
		return metav1.Condition{Type: string(mcsv1b1.ServiceImportConditionReady), Status: status, Reason: string(reason), Message: bounded(msg)}
	}
	switch {
	case plan.Import.Headless:
		return cond(metav1.ConditionTrue, mcsv1b1.ServiceImportReasonReady, "imported from "+strings.Join(plan.Import.Clusters, ", "))
	case derived != nil && len(derived.Spec.ClusterIPs) > 0:
		return cond(metav1.ConditionTrue, mcsv1b1.ServiceImportReasonReady, fmt.Sprintf("imported from %s, at %s's ClusterIPs", strings.Join(plan.Import.Clusters, ", "), derived.Name))
	case derivedErr != nil && strings.Contains(derivedErr.Error(), "not configured on this cluster"):
		return cond(metav1.ConditionFalse, mcsv1b1.ServiceImportReasonIPFamilyNotSupported, derivedErr.Error())
	case derivedErr != nil:
		return cond(metav1.ConditionFalse, mcsv1b1.ServiceImportReasonPending, derivedErr.Error())
	}
	return cond(metav1.ConditionFalse, mcsv1b1.ServiceImportReasonPending, "waiting for the ClusterIPs of "+api.DerivedPrefix+name)
}

// emptyImport takes back from another's ServiceImport that nothing
// provides here any more what the controller filled in: the addresses and
// clusters (its spec.ips would name the deleted derived Service's VIP), and
// the strategy annotation if the controller added it. The type and ports
// stay. An import the controller never filled is not touched.
func (w *writer) emptyImport(ctx context.Context, imp *mcsv1b1.ServiceImport) error {
	if _, ok := imp.Annotations[api.AnnotationFilled]; !ok {
		return nil
	}
	_, err := w.updateImport(ctx, imp, desired.EmptyImport, desired.EmptyImportStatus)
	return err
}

// setImportSpec sets what the controller owns of a ServiceImport. The
// strategy annotation is set on its own import while a MultiClusterService
// enables native names, and removed when none does; another's import keeps
// the labels and annotations its owner gave it (setOthersImportMeta).
func (w *writer) setImportSpec(imp *mcsv1b1.ServiceImport, plan *desired.Plan, derived *corev1.Service, providerVIPs string) {
	imp.Spec.Type = mcsv1b1.ClusterSetIP
	if plan.Import.Headless {
		imp.Spec.Type = mcsv1b1.Headless
	}
	imp.Spec.Ports = append([]mcsv1b1.ServicePort{}, plan.Import.Ports...)
	imp.Spec.IPs, imp.Spec.IPFamilies = nil, nil
	switch {
	case plan.Import.Headless:
		imp.Spec.IPFamilies = slices.Clone(plan.Import.HeadlessFamilies)
	case derived != nil:
		imp.Spec.IPs = slices.Clone(derived.Spec.ClusterIPs)
		imp.Spec.IPFamilies = slices.Clone(derived.Spec.IPFamilies)
	}
	t := plan.Import.Traffic
	imp.Spec.SessionAffinity, imp.Spec.SessionAffinityConfig = t.SessionAffinity, t.SessionAffinityConfig.DeepCopy()
	imp.Spec.InternalTrafficPolicy, imp.Spec.TrafficDistribution = t.InternalTrafficPolicy, t.TrafficDistribution
	w.prunedHere().drop(imp)
	if ours(imp) {
		setOwnImportMeta(imp, plan, providerVIPs)
	} else {
		setOthersImportMeta(imp)
	}
}

// setOwnImportMeta makes the labels and annotations of the controller's
// own import: the exports' (KEP-1645), its label, the strategy, and the
// provider Services' VIPs.
func setOwnImportMeta(imp *mcsv1b1.ServiceImport, plan *desired.Plan, providerVIPs string) {
	imp.Labels = maps.Clone(plan.Import.Labels)
	if imp.Labels == nil {
		imp.Labels = map[string]string{}
	}
	imp.Labels[api.LabelManagedBy] = api.ManagedBy
	imp.Labels[api.LabelBucket] = shards.Label(imp.Namespace, imp.Name)
	imp.Annotations = maps.Clone(plan.Import.Annotations)
	if plan.Native != nil {
		if imp.Annotations == nil {
			imp.Annotations = map[string]string{}
		}
		maps.Copy(imp.Annotations, plan.Native)
	}
	if providerVIPs != "" {
		if imp.Annotations == nil {
			imp.Annotations = map[string]string{}
		}
		imp.Annotations[api.AnnotationProviderVIPs] = providerVIPs
	}
}

// setOthersImportMeta notes on another's import that the controller filled
// it in; the labels and other annotations are its owner's. It never sets
// the strategy annotation there: that would make coredns-mcs answer the
// service's cluster.local name from an import the controller does not own,
// and the member's admission policy refuses it (docs/concepts.md,
// "Trust"). The strategy an older controller added (api.FilledStrategy)
// is taken back.
func setOthersImportMeta(imp *mcsv1b1.ServiceImport) {
	imp.Annotations = maps.Clone(imp.Annotations)
	if imp.Annotations == nil {
		imp.Annotations = map[string]string{}
	}
	if imp.Annotations[api.AnnotationFilled] == api.FilledStrategy {
		desired.DropNative(imp.Annotations)
	}
	imp.Annotations[api.AnnotationFilled] = api.FilledSpec
}

// writeImport writes have with change made to it, and returns the import
// as written, having noted what the member's CRD pruned of it.
func (w *writer) writeImport(ctx context.Context, verb string, have *mcsv1b1.ServiceImport, change func(*mcsv1b1.ServiceImport)) (*mcsv1b1.ServiceImport, error) {
	client := w.m.ServiceImports(w.namespace)
	write := client.Update
	if verb == "update-status" {
		write = client.UpdateStatus
	}
	var sent *mcsv1b1.ServiceImport
	got, err := save(w, "ServiceImport", verb, have.Name, func() (*mcsv1b1.ServiceImport, error) {
		var err error
		if sent, err = toChange(ctx, have, client.Get); err != nil {
			return nil, err
		}
		change(sent)
		return write(ctx, sent)
	})
	if err != nil {
		return nil, err
	}
	w.notePruned(sent, got)
	return got, nil
}

// removeImport deletes the controller's ServiceImport of the service, and
// empties a user's (emptyImport).
func (w *writer) removeImport(ctx context.Context, name string) error {
	switch imp := w.serviceImport(name); {
	case imp == nil:
		return nil
	case ours(imp):
		return w.deleteImport(ctx, imp)
	default:
		return w.emptyImport(ctx, imp)
	}
}

func (w *writer) deleteImport(ctx context.Context, imp *mcsv1b1.ServiceImport) error {
	return w.drop("ServiceImport", imp, func(opts metav1.DeleteOptions) error {
		return w.m.ServiceImports(w.namespace).Delete(ctx, imp.Name, opts)
	})
}

// The fields of a ServiceImport that mcs-api's older CRDs lack: a member
// whose CRD is older drops them from every write, and a compare that
// counted them would write at every sync. What a member dropped once is
// neither set nor compared there again, until the controller restarts.
type prunedFields struct{ traffic, families, status bool }

// prunedHere is what the writer's member drops.
func (w *writer) prunedHere() prunedFields {
	if p := w.perMember.of(w.m.Name).pruned.Load(); p != nil {
		return *p
	}
	return prunedFields{}
}

// drop leaves out of imp what its member drops.
func (p prunedFields) drop(imp *mcsv1b1.ServiceImport) {
	if p.traffic {
		imp.Spec.SessionAffinity, imp.Spec.SessionAffinityConfig = "", nil
		imp.Spec.InternalTrafficPolicy, imp.Spec.TrafficDistribution = nil, nil
	}
	if p.families {
		imp.Spec.IPFamilies = nil
	}
}

// dropStatus leaves out of s what its member drops: v1alpha1's status
// has clusters only.
func (p prunedFields) dropStatus(s *mcsv1b1.ServiceImportStatus) {
	if p.status {
		s.EndpointSliceObjects, s.Conditions = "", nil
	}
}

// notePruned compares what was written with what the API server kept.
func (w *writer) notePruned(sent, got *mcsv1b1.ServiceImport) {
	p := w.prunedHere()
	was := p
	s, g := sent.Spec, got.Spec
	p.traffic = p.traffic || (s.SessionAffinity != "" && g.SessionAffinity == "") ||
		(s.InternalTrafficPolicy != nil && g.InternalTrafficPolicy == nil) || (s.TrafficDistribution != nil && g.TrafficDistribution == nil)
	p.families = p.families || (len(s.IPFamilies) > 0 && len(g.IPFamilies) == 0)
	p.status = p.status || (len(sent.Status.Conditions) > 0 && len(got.Status.Conditions) == 0) ||
		(sent.Status.EndpointSliceObjects != "" && got.Status.EndpointSliceObjects == "")
	if p != was {
		klog.InfoS("The member's ServiceImport CRD drops fields of mcs-api's v1beta1: they are left out there; install deploy/mcs-api's CRDs to have them", "cluster", w.m.Name, "trafficFields", p.traffic, "ipFamilies", p.families, "status", p.status)
		w.perMember.of(w.m.Name).pruned.Store(&p)
	}
}
