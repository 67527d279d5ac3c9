package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The ServiceExports' status: the MCS API's conditions Valid, Ready and
// Conflict, with mcs-api's reasons.

// reportExports sets the MCS API conditions of every ServiceExport of the
// service: Valid, Ready and Conflict, with mcs-api's reasons; in the
// members of the sync's roster alone, whose plan it is.
func (c *Controller) reportExports(ctx context.Context, namespace, name string, plan *desired.Plan, out *outcome, r roster) {
	updates := map[string]*mcsv1b1.ServiceExport{}
	var ms []*members.Member
	for _, m := range r.writable(c.opts.Members.List()) {
		exp := latestOf(c.track, trackKey{m.Name, "ServiceExport", namespace, name}, m.Export(namespace, name))
		// An unreachable member's write would only wait for its time-out;
		// it is reported to once it is back, which queues every service.
		if ok, _ := m.Reachable(); exp == nil || !ok || !r.synced[m] || !m.Synced() {
			continue
		}
		upd := exp.DeepCopy()
		for _, cond := range exportConditions(m.Service(namespace, name), m.Name, key(exp), plan, out) {
			cond.ObservedGeneration, cond.Message = exp.Generation, bounded(cond.Message)
			meta.SetStatusCondition(&upd.Status.Conditions, cond)
		}
		if !equality.Semantic.DeepEqual(upd.Status, exp.Status) {
			updates[m.Name] = upd
			ms = append(ms, m)
		}
	}
	c.fan.run(namespace+"/"+name, ms, out, func(m *members.Member, mine *outcome) {
		w := c.writer(m, namespace, name, mine)
		wctx, cancel := context.WithTimeout(ctx, applyTimeout)
		defer cancel()
		if err := w.writeExportStatus(wctx, updates[m.Name]); err != nil {
			mine.applyFailed(m.Name, err)
		}
	})
}

// onTheHub says where the causes a member is not told are.
const onTheHub = "the MultiClusterService's conditions, or mcs-controller's log on the hub, say why"

// failedIn is how many clusters errs, each "cluster: error", name.
func failedIn(errs []string) int {
	seen := map[string]bool{}
	for _, e := range errs {
		cluster, _, _ := strings.Cut(e, ":")
		seen[cluster] = true
	}
	return len(seen)
}

func clusters(n int) string {
	if n == 1 {
		return "1 consumption cluster"
	}
	return fmt.Sprintf("%d consumption clusters", n)
}

func exportConditions(svc *corev1.Service, cluster, service string, plan *desired.Plan, out *outcome) []metav1.Condition {
	valid := mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionValid, metav1.ConditionTrue, mcsv1b1.ServiceExportReasonValid, "the Service is exported")
	switch {
	case svc == nil:
		valid = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionValid, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonNoService, fmt.Sprintf("%s has no Service %s", cluster, service))
	case sourceService(svc) == nil:
		valid = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionValid, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonInvalidServiceType,
			fmt.Sprintf("%s is the Service mcs-controller made for the imported endpoints of %s: it cannot be exported", service, strings.TrimPrefix(svc.Name, api.DerivedPrefix)))
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		valid = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionValid, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonInvalidServiceType, "an ExternalName Service cannot be exported")
	case plan.Unexportable != nil:
		valid = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionValid, metav1.ConditionFalse, plan.Unexportable.Reason, plan.Unexportable.Message)
	case plan.NotAllowed[cluster].Reason != "":
		valid = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionValid, metav1.ConditionFalse, plan.NotAllowed[cluster].Reason, plan.NotAllowed[cluster].Message)
	}
	conflict := mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionConflict, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonNoConflicts, "no conflict with the other exports")
	if cf, ok := plan.ConflictOf(cluster); ok {
		conflict = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionConflict, metav1.ConditionTrue, cf.Reason, cf.Message)
	}
	// Consumers that cannot be reached, or are slow, have not got it yet.
	// The member is told how many, not why: the causes are other
	// members' facts (their addresses, their Secrets' names), which stay
	// on the hub.
	pending := len(causesIn(out.unreachable, plan.Consumption)) + len(causesIn(out.slow, plan.Consumption))
	ready := mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionReady, metav1.ConditionTrue, mcsv1b1.ServiceExportReasonExported, "imported into "+strings.Join(plan.Consumption, ", "))
	switch {
	case valid.Status != metav1.ConditionTrue:
		ready = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionReady, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonFailed, valid.Message)
	case len(out.applyErrs) > 0:
		ready = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionReady, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonFailed,
			fmt.Sprintf("writes into %s failed; %s", clusters(failedIn(out.applyErrs)), onTheHub))
	case pending > 0:
		ready = mcsv1b1.NewServiceExportCondition(mcsv1b1.ServiceExportConditionReady, metav1.ConditionFalse, mcsv1b1.ServiceExportReasonPending,
			fmt.Sprintf("not yet in %s (unreachable, or slow); %s", clusters(pending), onTheHub))
	}
	return []metav1.Condition{valid, ready, conflict}
}

func (w *writer) writeExportStatus(ctx context.Context, exp *mcsv1b1.ServiceExport) error {
	_, err := save(w, "ServiceExport", "update-status", exp.Name, func() (*mcsv1b1.ServiceExport, error) {
		return w.m.UpdateExportStatus(ctx, exp)
	})
	return err
}
