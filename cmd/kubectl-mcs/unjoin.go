package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/deploy/member"
)

// pollEvery is how often unjoin looks whether the controller has cleaned
// the member yet.
const pollEvery = 2 * time.Second

type unjoinOptions struct {
	writeOptions
	timeout time.Duration
}

func newUnjoin(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &unjoinOptions{writeOptions: writeOptions{hubOptions: hubOptions{flags: flags, streams: streams}, verb: "unjoin"}}
	cmd := &cobra.Command{
		Use:   "unjoin CLUSTER --context MEMBER|--member-context CLUSTER=MEMBER [--hub-context HUB] [--controller-namespace NAMESPACE] [--timeout 2m]",
		Short: "Take a member cluster's registration back, and everything mcs-controller wrote there",
		Long: `unjoin reverses join, and leaves nothing of mcs-controller's behind:
  - it deletes the hub's Secret CLUSTER (--hub-context): the controller retires the member, which
    stops providing and consuming, and deletes what it wrote there;
  - it waits (--timeout, 2m) until the member (--context, or --member-context CLUSTER=CONTEXT; never
    the current context) holds none of it: no imported EndpointSlice, no Service or ServiceImport
    labelled app.kubernetes.io/managed-by=mcs-controller.coredns-mcs.io, no ServiceImport of yours
    that the controller filled in. What is left then, it deletes itself (your ServiceImports it
    empties, as the controller does, and never deletes), and the Leases source-* in mcs-system;
  - then it deletes the member account (the ServiceAccount mcs-member) and its RBAC in the member,
    which revokes every token join made, and what is left of the account join made before that one
    had a name of its own (mcs-controller's member RBAC; its ServiceAccount too, but on the hub);
  - and the Lease source-CLUSTER in every other member the hub's Secrets name, each reached through
    the context of its name or the one --member-context maps it to, so that no CoreDNS there counts
    CLUSTER as a stale source for ever.
It refuses, changing nothing, a member context that reaches the hub's API server, unless
--hub-as-member says the hub is a member too. Namespace
mcs-system stays in the member (CoreDNS's RBAC lives there), and so do the namespaces the controller
made. A Lease it cannot delete in another member is named, with the command that deletes it, and
unjoin exits 1 once it has done the rest.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := noNamespace(cmd); err != nil {
				return err
			}
			return o.run(cmd.Context(), args[0])
		},
	}
	o.addFlags(cmd)
	o.addMemberContexts(cmd)
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long to wait for mcs-controller to clean the member before unjoin deletes what is left itself (0: at once, as when the controller is not running)")
	return cmd
}

func (o *unjoinOptions) run(ctx context.Context, cluster string) error {
	if err := validClusterName(cluster); err != nil {
		return err
	}
	if err := o.member(cluster); err != nil {
		return err
	}
	dryRun, err := o.dryRunAll()
	if err != nil {
		return err
	}
	hub, m, err := o.clients()
	if err != nil {
		return err
	}
	u := &unjoin{
		cluster: cluster, namespace: o.controllerNamespace, context: *o.flags.Context, hubAsMember: o.hubAsMember,
		dryRun: dryRun, timeout: o.timeout, clock: clock.RealClock{},
		out: o.streams.Out, progress: o.streams.ErrOut,
		hub: hub, member: m, other: o.other,
	}
	return u.run(ctx)
}

// other reaches another member through its context.
func (o *unjoinOptions) other(cluster string) (kubernetes.Interface, error) {
	cfg, err := o.memberConfig(cluster)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// waitClock is the time unjoin waits by.
type waitClock interface {
	Now() time.Time
	After(time.Duration) <-chan time.Time
}

// unjoin takes member cluster back: the steps, in their order, with the
// clients they need.
type unjoin struct {
	cluster   string
	namespace string // the controller's, on the hub
	context   string // the member's
	// hubAsMember: the member may be the hub (--hub-as-member).
	hubAsMember bool
	dryRun      []string
	timeout     time.Duration
	clock       waitClock
	out         io.Writer
	progress    io.Writer
	hub         kubernetes.Interface
	member      *memberClients
	other       func(cluster string) (kubernetes.Interface, error)
}

func (u *unjoin) run(ctx context.Context) error {
	hubID, isHub, err := notTheHub(ctx, u.hub, u.member.kube, u.context, u.hubAsMember)
	if err != nil {
		return err
	}
	registered, err := u.deleteSecret(ctx)
	if err != nil {
		return fmt.Errorf("the hub: %w", err)
	}
	left, err := u.waitClean(ctx, registered && u.dryRun == nil)
	if err != nil {
		return fmt.Errorf("the member: %w", err)
	}
	cleaned := len(left)
	if err := u.clean(ctx, left); err != nil {
		return fmt.Errorf("the member: %w", err)
	}
	if err := u.removeAccess(ctx, isHub); err != nil {
		return fmt.Errorf("the member: %w", err)
	}
	forgotten, failed := u.forgetElsewhere(ctx, hubID)
	u.report(cleaned, forgotten)
	if len(failed) > 0 {
		return fmt.Errorf("the Lease %s%s is left in %s", api.LeasePrefix, u.cluster, strings.Join(failed, "; "))
	}
	return nil
}

// deleteSecret deletes the hub's Secret of the member, if it registers
// it; registered says whether there was one, whose deletion has the
// controller clean the member.
func (u *unjoin) deleteSecret(ctx context.Context) (registered bool, err error) {
	secrets := u.hub.CoreV1().Secrets(u.namespace)
	s, err := secrets.Get(ctx, u.cluster, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	case s.Labels[api.LabelCluster] != u.cluster:
		return false, fmt.Errorf("the Secret %s/%s does not register member %s (label %s is %q): left alone", u.namespace, u.cluster, u.cluster, api.LabelCluster, s.Labels[api.LabelCluster])
	}
	err = secrets.Delete(ctx, u.cluster, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}, DryRun: u.dryRun})
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return true, nil
}

// leftover is an object of the controller's in the member: deleted, or
// emptied when it is a user's ServiceImport the controller filled in.
type leftover struct {
	resource schema.GroupVersionResource
	obj      *unstructured.Unstructured
	empty    bool
}

// controllerKinds are what the controller writes into a member, with the
// label that marks its own; it cleans them when the member retires. A
// user's ServiceImport carries no label: all are read.
var controllerKinds = []struct {
	kind     schema.GroupKind
	label    string
	selector bool
}{
	{schema.GroupKind{Group: discoveryv1.GroupName, Kind: "EndpointSlice"}, discoveryv1.LabelManagedBy, true},
	{schema.GroupKind{Kind: "Service"}, api.LabelManagedBy, true},
	{schema.GroupKind{Group: mcsv1b1.GroupName, Kind: "ServiceImport"}, api.LabelManagedBy, false},
}

// leftovers lists what the member holds of the controller's.
func (u *unjoin) leftovers(ctx context.Context) ([]leftover, error) {
	var out []leftover
	for _, k := range controllerKinds {
		mapping, err := u.member.mapper.RESTMapping(k.kind)
		if meta.IsNoMatchError(err) {
			continue // not served (the MCS API's CRDs are not installed): nothing of it
		}
		if err != nil {
			return nil, err
		}
		opts := metav1.ListOptions{}
		if k.selector {
			opts.LabelSelector = k.label + "=" + api.ManagedBy
		}
		list, err := u.member.dyn.Resource(mapping.Resource).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", mapping.Resource.Resource, err)
		}
		slices.SortFunc(list.Items, byKey)
		for i := range list.Items {
			obj := &list.Items[i]
			_, filled := obj.GetAnnotations()[api.AnnotationFilled]
			switch {
			case obj.GetLabels()[k.label] == api.ManagedBy:
				out = append(out, leftover{resource: mapping.Resource, obj: obj})
			case filled:
				out = append(out, leftover{resource: mapping.Resource, obj: obj, empty: true})
			}
		}
	}
	return out, nil
}

// byKey orders objects by namespace/name, as unjoin treats them.
func byKey(a, b unstructured.Unstructured) int {
	return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
}

// waitClean waits, when the controller is cleaning the member, until it
// has or the timeout runs out, and returns what is left.
func (u *unjoin) waitClean(ctx context.Context, cleaning bool) ([]leftover, error) {
	deadline := u.clock.Now().Add(u.timeout)
	for said := false; ; said = true {
		left, err := u.leftovers(ctx)
		if err != nil || len(left) == 0 || !cleaning || !u.clock.Now().Before(deadline) {
			return left, err
		}
		if !said {
			fmt.Fprintf(u.progress, "waiting up to %s for mcs-controller to clean %s (%d objects of its there)\n", u.timeout, u.cluster, len(left))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-u.clock.After(pollEvery):
		}
	}
}

// clean deletes, or empties, what the controller left in the member, and
// its Leases source-* there, which it renews but never deletes.
func (u *unjoin) clean(ctx context.Context, left []leftover) error {
	leases, err := u.leases(ctx)
	if err != nil {
		return err
	}
	for _, l := range append(left, leases...) {
		r := u.member.dyn.Resource(l.resource).Namespace(l.obj.GetNamespace())
		if l.empty {
			err = u.emptyImport(ctx, r, l.obj)
		} else {
			err = u.delete(ctx, r, l.obj)
		}
		if err != nil {
			return fmt.Errorf("%s %s/%s: %w", l.obj.GetKind(), l.obj.GetNamespace(), l.obj.GetName(), err)
		}
	}
	return nil
}

// leases are the controller's Leases source-* in the member.
func (u *unjoin) leases(ctx context.Context) ([]leftover, error) {
	gvr := schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}
	list, err := u.member.dyn.Resource(gvr).Namespace(api.LeaseNamespace).List(ctx, metav1.ListOptions{LabelSelector: api.LabelManagedBy + "=" + api.ManagedBy})
	if err != nil {
		return nil, fmt.Errorf("listing Leases in %s: %w", api.LeaseNamespace, err)
	}
	slices.SortFunc(list.Items, byKey)
	var out []leftover
	for i := range list.Items {
		if strings.HasPrefix(list.Items[i].GetName(), api.LeasePrefix) {
			out = append(out, leftover{resource: gvr, obj: &list.Items[i]})
		}
	}
	return out, nil
}

// delete deletes obj, as it was listed: one made anew since is not the
// controller's leftover.
func (u *unjoin) delete(ctx context.Context, r dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	uid := obj.GetUID()
	err := r.Delete(ctx, obj.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, DryRun: u.dryRun})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// emptyImport takes back from a user's ServiceImport what the controller
// filled in, as the controller does (desired.EmptyImport): the import is
// its owner's, and stays.
func (u *unjoin) emptyImport(ctx context.Context, r dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
	update := func(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error) {
		return r.Update(ctx, obj, opts)
	}
	got, err := u.updateImport(ctx, update, obj, desired.EmptyImport)
	if err != nil || u.dryRun != nil {
		return err
	}
	_, err = u.updateImport(ctx, r.UpdateStatus, got, desired.EmptyImportStatus)
	return err
}

// updateImport writes a ServiceImport, of whichever MCS API version the
// member serves (their fields are the same), changed by change.
func (u *unjoin) updateImport(ctx context.Context, write func(context.Context, *unstructured.Unstructured, metav1.UpdateOptions) (*unstructured.Unstructured, error),
	obj *unstructured.Unstructured, change func(*mcsv1b1.ServiceImport)) (*unstructured.Unstructured, error) {
	var imp mcsv1b1.ServiceImport
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &imp); err != nil {
		return nil, err
	}
	change(&imp)
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&imp)
	if err != nil {
		return nil, err
	}
	return write(ctx, &unstructured.Unstructured{Object: content}, metav1.UpdateOptions{DryRun: u.dryRun})
}

// removeAccess deletes deploy/member's RBAC of the member account in the
// member, which revokes every token of its ServiceAccount, and what is
// left of the account before it (legacyAccess), whose ServiceAccount on
// the hub is the controller's own and stays.
func (u *unjoin) removeAccess(ctx context.Context, isHub bool) error {
	var keep func(*unstructured.Unstructured) bool
	if isHub {
		keep = legacyAccount
	}
	for _, doc := range [][]byte{member.ControllerNamespaces, member.ControllerRBAC, []byte(legacyAccess)} {
		if _, err := u.member.deleteEach(ctx, doc, u.dryRun, keep); err != nil {
			return err
		}
	}
	return nil
}

// forgetElsewhere deletes the controller's Lease source-<member> in every
// other member the hub's Secrets name: nothing renews it any more, and
// CoreDNS there would count the member a stale source for ever. It returns
// the members it was deleted in, and why it is left in the others.
func (u *unjoin) forgetElsewhere(ctx context.Context, hubID types.UID) (forgotten, failed []string) {
	others, err := u.others(ctx)
	if err != nil {
		return nil, []string{fmt.Sprintf("every other member: the hub's member Secrets: %v", err)}
	}
	for _, c := range others {
		err := u.forget(ctx, c, hubID)
		switch {
		case errors.Is(err, errNoLease):
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v (delete it there: kubectl --context CONTEXT -n %s delete lease %s%s)", c, err, api.LeaseNamespace, api.LeasePrefix, u.cluster))
		default:
			forgotten = append(forgotten, c)
		}
	}
	return forgotten, failed
}

// errNoLease: the member holds no Lease of the controller's of that name.
var errNoLease = errors.New("no such Lease of the controller's")

// others are the members the hub's Secrets register, this one aside.
func (u *unjoin) others(ctx context.Context) ([]string, error) {
	secrets, err := u.hub.CoreV1().Secrets(u.namespace).List(ctx, metav1.ListOptions{LabelSelector: api.LabelCluster})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range secrets.Items {
		if c := s.Labels[api.LabelCluster]; c != u.cluster && validClusterName(c) == nil {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// forget deletes the Lease source-<member> in cluster, if the controller
// made it; a context that reaches the hub is refused.
func (u *unjoin) forget(ctx context.Context, cluster string, hubID types.UID) error {
	kube, err := u.other(cluster)
	if err != nil {
		return err
	}
	id, err := clusterID(ctx, kube)
	switch {
	case err != nil:
		return err
	case id == hubID:
		return errors.New("its context reaches the hub's API server: left alone")
	}
	leases := kube.CoordinationV1().Leases(api.LeaseNamespace)
	l, err := leases.Get(ctx, api.LeasePrefix+u.cluster, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return errNoLease
	case err != nil:
		return err
	case l.Labels[api.LabelManagedBy] != api.ManagedBy:
		return errNoLease
	}
	err = leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &l.UID}, DryRun: u.dryRun})
	if apierrors.IsNotFound(err) {
		return errNoLease
	}
	return err
}

// report says what unjoin did.
func (u *unjoin) report(cleaned int, forgotten []string) {
	if u.dryRun != nil {
		fmt.Fprintf(u.out, "%s would unjoin: the member and the hub accept every write (dry run)\n", u.cluster)
		return
	}
	by := "mcs-controller had cleaned the member"
	if cleaned > 0 {
		by = fmt.Sprintf("%d objects of mcs-controller's deleted or emptied in the member", cleaned)
	}
	elsewhere := ""
	if len(forgotten) > 0 {
		elsewhere = fmt.Sprintf("; Lease %s%s deleted in %s", api.LeasePrefix, u.cluster, strings.Join(forgotten, ", "))
	}
	fmt.Fprintf(u.out, "%s unjoined: Secret %s/%s deleted on the hub; %s; the controller's account deleted in the member%s\n", u.cluster, u.namespace, u.cluster, by, elsewhere)
}
