package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// Reasons of the MultiClusterService conditions.
const (
	reasonInvalidSpec        = "InvalidSpec"
	reasonApplied            = "Applied"
	reasonApplyFailed        = "ApplyFailed"
	reasonNoHubService       = "NoHubService"
	reasonCollected          = "Collected"
	reasonNoService          = "NoService"
	reasonClusterUnreachable = "ClusterUnreachable"
	reasonClusterLeft        = "ClusterLeft"
	reasonCleanupPending     = "CleanupPending"
	reasonNameTaken          = "NameTaken"
	reasonMemberSlow         = "MemberSlow"
)

func (c *Controller) addFinalizer(ctx context.Context, mcs *v1alpha1.MultiClusterService) error {
	return c.updateFinalizers(ctx, mcs, func(f []string) []string { return append(f, v1alpha1.Finalizer) })
}

// updateFinalizers changes the MultiClusterService's finalizers with a
// merge patch of them alone: the cache holds no labels, annotations nor
// owners (members.TrimHub), which an update of the cached object would
// delete. The patch carries the cached resourceVersion, which the API
// server takes as a precondition: one changed since conflicts, as an
// update would.
func (c *Controller) updateFinalizers(ctx context.Context, mcs *v1alpha1.MultiClusterService, change func([]string) []string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": mcs.ResourceVersion,
		"finalizers":      change(slices.Clone(mcs.Finalizers)),
	}})
	if err != nil {
		return err
	}
	got, err := c.opts.HubMCS.McsV1alpha1().MultiClusterServices(mcs.Namespace).Patch(ctx, mcs.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return c.wroteMCS(mcs, got, "patch", err)
}

// report sets the MultiClusterService's conditions and events from what the
// sync did, and lets it go once it is being deleted and all it caused is gone.
func (c *Controller) report(ctx context.Context, mcs *v1alpha1.MultiClusterService, plan *desired.Plan, out *outcome) error {
	if mcs.DeletionTimestamp == nil {
		return c.setConditions(ctx, mcs, conditions(mcs, plan, out))
	}
	if !slices.Contains(mcs.Finalizers, v1alpha1.Finalizer) || out.err() != nil {
		return out.err()
	}
	if len(out.unreachable) > 0 {
		// Cleaned where it can be; the rest when those members are back,
		// or deregistered.
		msg := "deleted, and cleaned in every member but these, which are cleaned when they are back or deregistered: " + join(nil, slices.Sorted(maps.Values(out.unreachable)))
		return c.setConditions(ctx, mcs, []metav1.Condition{falseCond(v1alpha1.EndpointSliceApplied, reasonCleanupPending, msg)})
	}
	if len(out.pending) > 0 {
		return nil // synced again once their writes end
	}
	return c.updateFinalizers(ctx, mcs, func(f []string) []string {
		return slices.DeleteFunc(f, func(f string) bool { return f == v1alpha1.Finalizer })
	})
}

// setConditions writes conditions that changed, and records an Event for
// each.
func (c *Controller) setConditions(ctx context.Context, mcs *v1alpha1.MultiClusterService, conds []metav1.Condition) error {
	upd := mcs.DeepCopy()
	changed := false
	var news []metav1.Condition
	for _, cond := range conds {
		cond.ObservedGeneration = mcs.Generation
		if was := meta.FindStatusCondition(mcs.Status.Conditions, cond.Type); newsworthy(was, cond) {
			news = append(news, cond)
		}
		changed = meta.SetStatusCondition(&upd.Status.Conditions, cond) || changed
	}
	if !changed {
		return nil
	}
	if err := c.updateStatus(ctx, upd); err != nil {
		return err // retried with its events
	}
	// Events say what changed, once: not for a new generation alone, and
	// not again when a conflicting write is retried.
	for _, cond := range news {
		c.event(mcs, cond)
	}
	return nil
}

// newsworthy reports whether a condition's change gets an Event: a
// failure, and a success that follows another state. A success that only
// says more (another consumer joined) is in the status: an Event per
// service would double the hub's writes of an initial sync, or a member's
// join.
func newsworthy(was *metav1.Condition, cond metav1.Condition) bool {
	switch {
	case cond.Status != metav1.ConditionTrue:
		return was == nil || was.Status != cond.Status || was.Reason != cond.Reason || was.Message != cond.Message
	case was == nil:
		return false
	}
	return was.Status != cond.Status || was.Reason != cond.Reason
}

func (c *Controller) event(mcs *v1alpha1.MultiClusterService, cond metav1.Condition) {
	if cond.Status == metav1.ConditionTrue {
		c.recorder.Event(mcs, corev1.EventTypeNormal, cond.Reason, cond.Message)
		return
	}
	c.recorder.Event(mcs, corev1.EventTypeWarning, cond.Reason, cond.Message)
}

// conditions are the three conditions of a MultiClusterService; a False one
// names the clusters and the causes.
func conditions(mcs *v1alpha1.MultiClusterService, plan *desired.Plan, out *outcome) []metav1.Condition {
	if plan.Invalid != "" {
		// A protected service is not the spec's fault: it says so.
		reason := reasonInvalidSpec
		if plan.Unexportable != nil && plan.Unexportable.Reason == desired.ReasonProtected {
			reason = string(desired.ReasonProtected)
		}
		return []metav1.Condition{
			falseCond(v1alpha1.ServiceApplied, reason, plan.Invalid),
			falseCond(v1alpha1.EndpointSliceCollected, reason, plan.Invalid),
			falseCond(v1alpha1.EndpointSliceApplied, reason, plan.Invalid),
		}
	}
	return []metav1.Condition{serviceApplied(mcs, plan, out), collected(mcs, plan, out), applied(mcs, plan, out)}
}

func serviceApplied(mcs *v1alpha1.MultiClusterService, plan *desired.Plan, out *outcome) metav1.Condition {
	if len(plan.Propagate) == 0 {
		return trueCond(v1alpha1.ServiceApplied, reasonNoHubService, fmt.Sprintf("no Service %s on the hub: the members' own Services are used", mcs.Name))
	}
	targets := slices.Sorted(maps.Keys(plan.Propagate))
	if msg := join(out.propagateErrs, causesIn(out.unreachable, targets)); msg != "" {
		return falseCond(v1alpha1.ServiceApplied, reasonApplyFailed, msg)
	}
	if msg := join(nil, causesIn(out.slow, targets)); msg != "" {
		return falseCond(v1alpha1.ServiceApplied, reasonMemberSlow, msg)
	}
	if msg := join(out.namesTaken, nil); msg != "" {
		return falseCond(v1alpha1.ServiceApplied, reasonNameTaken, msg)
	}
	return trueCond(v1alpha1.ServiceApplied, reasonApplied, "Service applied to "+consumers(mcs, targets))
}

func collected(mcs *v1alpha1.MultiClusterService, plan *desired.Plan, out *outcome) metav1.Condition {
	provision := plan.Provision
	if len(mcs.Spec.ServiceProvisionClusters) == 0 {
		provision = slices.Concat(provision, plan.Unknown) // any unknown member may have the Service
	}
	if msg := join(nil, causesIn(out.unreachable, provision)); msg != "" {
		return falseCond(v1alpha1.EndpointSliceCollected, reasonClusterUnreachable, msg)
	}
	if len(plan.LeftProvision) > 0 {
		return falseCond(v1alpha1.EndpointSliceCollected, reasonClusterLeft, left("spec.serviceProvisionClusters", plan.LeftProvision))
	}
	notAllowed := messages(plan.NotAllowed)
	if plan.Import == nil {
		where := "any member"
		if len(provision) > 0 {
			where = strings.Join(provision, ", ")
		}
		msg := fmt.Sprintf("no Service %s/%s in %s", mcs.Namespace, mcs.Name, where)
		if len(notAllowed) > 0 {
			msg = join([]string{msg}, notAllowed)
		}
		return falseCond(v1alpha1.EndpointSliceCollected, reasonNoService, msg)
	}
	// No counts here: the status would then be written on every endpoint change.
	msg := "EndpointSlices collected from " + strings.Join(plan.Import.Clusters, ", ")
	if notes := join(plan.Skipped, slices.Concat(messages(plan.Conflicts), notAllowed, pacedNotes(out.paced))); notes != "" {
		msg += "; " + notes
	}
	return trueCond(v1alpha1.EndpointSliceCollected, reasonCollected, bounded(msg))
}

// pacedNotes say which providers' changes wait for their budget.
func pacedNotes(paced []string) []string {
	var out []string
	for _, c := range paced {
		out = append(out, c+" changes its EndpointSlices, Services, ServiceExports or ServiceImports faster than --member-change-rate allows: its changes reach the consumers paced")
	}
	return out
}

func applied(mcs *v1alpha1.MultiClusterService, plan *desired.Plan, out *outcome) metav1.Condition {
	if msg := join(out.applyErrs, nil); msg != "" {
		return falseCond(v1alpha1.EndpointSliceApplied, reasonApplyFailed, msg)
	}
	if msg := join(nil, causesIn(out.unreachable, plan.Consumption)); msg != "" {
		return falseCond(v1alpha1.EndpointSliceApplied, reasonClusterUnreachable, msg)
	}
	if msg := join(nil, causesIn(out.slow, plan.Consumption)); msg != "" {
		return falseCond(v1alpha1.EndpointSliceApplied, reasonMemberSlow, msg)
	}
	if len(plan.LeftConsumption) > 0 {
		return falseCond(v1alpha1.EndpointSliceApplied, reasonClusterLeft, left("spec.serviceConsumptionClusters", plan.LeftConsumption))
	}
	if plan.Import == nil {
		return falseCond(v1alpha1.EndpointSliceApplied, reasonNoService, "nothing to import: no provision cluster has the Service")
	}
	return trueCond(v1alpha1.EndpointSliceApplied, reasonApplied, "imported into "+consumers(mcs, plan.Consumption))
}

// consumers names the clusters a True condition applied to, or "every
// member" when the spec names no consumption clusters: a member joining
// or leaving the fleet then rewrites no status (a fleet's thousands of
// them, when one is what the join costs).
func consumers(mcs *v1alpha1.MultiClusterService, clusters []string) string {
	if len(mcs.Spec.ServiceConsumptionClusters) == 0 {
		return "every member"
	}
	return strings.Join(clusters, ", ")
}

// left says that a list of the spec names clusters that left.
func left(field string, clusters []string) string {
	return bounded(fmt.Sprintf("%s names %s, no longer a member (deregistered): the other clusters are served; take it out of the spec", field, strings.Join(clusters, ", ")))
}

// messages are the causes' messages, by cluster name.
func messages(causes map[string]desired.Cause) []string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(causes)) {
		out = append(out, causes[c].Message)
	}
	return out
}

// causesIn are the causes, by cluster, of those of clusters that have one.
func causesIn(causes map[string]string, clusters []string) []string {
	var msgs []string
	for _, c := range slices.Sorted(maps.Keys(causes)) {
		if slices.Contains(clusters, c) {
			msgs = append(msgs, causes[c])
		}
	}
	return msgs
}

// Bounds of a condition's message. The API allows 32,768 characters; a
// status update past that would be refused, and a person reads the first
// few causes anyway: the rest are counted.
const (
	maxCauses  = 5
	maxMessage = 4096
)

// join lists the causes of a condition, the first maxCauses of them, and
// how many more there are.
func join(a, b []string) string {
	all := slices.Concat(a, b)
	if len(all) > maxCauses {
		all = append(all[:maxCauses:maxCauses], fmt.Sprintf("and %d more", len(all)-maxCauses))
	}
	return bounded(strings.Join(all, "; "))
}

// bounded cuts a message to maxMessage bytes, at a rune boundary, and
// blanks what is not printable: a message carries what members' API
// servers answered, and an escape sequence in it would reach the terminal
// of whoever reads the status.
func bounded(msg string) string {
	msg = strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, msg)
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}

func trueCond(t, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: bounded(msg)}
}

func falseCond(t, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: bounded(msg)}
}

func (c *Controller) updateStatus(ctx context.Context, mcs *v1alpha1.MultiClusterService) error {
	got, err := c.opts.HubMCS.McsV1alpha1().MultiClusterServices(mcs.Namespace).UpdateStatus(ctx, mcs, metav1.UpdateOptions{})
	return c.wroteMCS(mcs, got, "update-status", err)
}

// wroteMCS counts a write of mcs and remembers what it returned: a sync
// of the key before the informer has the write reads it from there,
// rather than write on a stale resourceVersion and conflict.
func (c *Controller) wroteMCS(mcs, got *v1alpha1.MultiClusterService, verb string, err error) error {
	var kept metav1.Object
	if err == nil {
		kept = members.TrimHubObject(got)
	}
	return hubWrote(c.track, mcsKey(mcs.Namespace, mcs.Name), mcs, kept, key(mcs), verb, "MultiClusterService "+key(mcs), err)
}

func mcsKey(namespace, name string) trackKey {
	return trackKey{cluster: "hub", kind: "MultiClusterService", namespace: namespace, name: name}
}

func key(o metav1.Object) string { return o.GetNamespace() + "/" + o.GetName() }
