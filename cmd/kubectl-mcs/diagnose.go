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
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/deploy/member"
)

type diagnoseOptions struct {
	statusOptions
	dnsServers map[string]string
}

func newDiagnose(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &diagnoseOptions{statusOptions: statusOptions{hubOptions: hubOptions{flags: flags, streams: streams}}}
	cmd := &cobra.Command{
		Use:   "diagnose SERVICE [-n NAMESPACE] [--hub-context HUB] [--members A,B] [--member-context CLUSTER=CONTEXT] [--dns MEMBER=HOST:PORT] [-o json]",
		Short: "Walk the path a multi-cluster service's name takes, and name the first broken link with its fix",
		Long: `diagnose walks the path of SERVICE (in -n's namespace) link by link, each check with a verdict
(ok, fail, or unknown when it cannot tell) and, when it fails, a fix:
  hub      a replica of mcs-controller leads (its Lease mcs-controller, or mcs-controller-shard-<i>,
           in --controller-namespace, held and renewed within its duration); no member Secret
           refused (a Warning Event MemberRefused on it); the MultiClusterService's conditions,
           True at its generation;
  member   each member reachable (through the context of its name or --member-context), its
           credentials on the hub not about to lapse, the MCS API served, and the controller's
           RBAC there (a SubjectAccessReview per permission of deploy/member);
  export   someone provides the service, and some provider has a ready endpoint; each
           provider's ServiceExport Valid, without Conflict;
  import   each consumer's ServiceImport, with the MultiClusterService's strategy annotation;
  derived  derived-<svc> holding the import's VIPs;
  slices   every source slice imported, current with its generation, none left over;
  lease    each provider's Lease source-<provider> in each consumer, fresh;
  coredns  each consumer's CoreDNS: runs mcs (its pod's coredns_mcs_* metrics; the image's name
           only when they cannot be read), the mcs stanza for its cluster name (its cluster option,
           or the ClusterProperty cluster.clusterset.k8s.io), its ServiceAccount's RBAC, ready and
           synced (its /ready and /metrics read through the API server's pods/proxy; unknown when
           you may not); NodeLocal DNSCache, where it runs, forwarding clusterset.local to the
           cluster DNS;
  dns      for each --dns MEMBER=HOST:PORT, the answer coredns-mcs gives each of the service's names
           against the one it should give by the strategy, the Corefile's answer mode and the
           imported slices;
  connect  what a connection needs, as objects tell it (no connection is made here; kubectl mcs
           verify makes real ones, with pods of its own): each consumer's
           imported endpoints carrying derived-<svc>'s ports; in each provider, a NetworkPolicy
           that selects the service's pods admitting traffic from outside the cluster (a WARN:
           diagnose cannot know the other clusters' pod CIDRs).
The first failed check is the first broken link. It exits 0 when every check passes, 1 when one
failed, and 2 when it could not run (bad flags, the hub unreachable). -o json prints
{"namespace", "service", "checks": [{"link", "cluster", "check", "verdict", "problem", "fix",
"severity"}], "failed", "unknown", "firstBroken"}. It reads, never writes: docs/troubleshooting.md
says what its account needs.`,
		Args: func(cmd *cobra.Command, args []string) error { return couldNotRun(cobra.ExactArgs(1)(cmd, args)) },
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != "" && o.output != "json" {
				return couldNotRun(fmt.Errorf("-o %s: json, or a list without it", o.output))
			}
			return o.run(cmd.Context(), args[0])
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return couldNotRun(err) })
	o.addFlags(cmd)
	o.addMemberContexts(cmd)
	o.addMemberFlags(cmd)
	cmd.Flags().StringToStringVar(&o.dnsServers, "dns", nil, "MEMBER=HOST:PORT of a member's coredns-mcs to ask, where this machine reaches it")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json; a list without it")
	return cmd
}

// couldNotRun makes err exit 2: diagnose found nothing, it could not look.
func couldNotRun(err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: 2, err: err}
}

// errChecksFailed makes the command exit 1 after the verdicts are printed.
var errChecksFailed = errors.New("checks failed")

// Diagnosis is what diagnose found, as -o json prints it.
type Diagnosis struct {
	Namespace   string  `json:"namespace"`
	Service     string  `json:"service"`
	Checks      []Check `json:"checks"`
	Failed      int     `json:"failed"`
	Unknown     int     `json:"unknown"`
	FirstBroken *Check  `json:"firstBroken,omitempty"` // the first failed check on the path
}

func (o *diagnoseOptions) run(ctx context.Context, svc string) error {
	w, err := o.read(ctx, svc)
	if err != nil {
		return couldNotRun(err)
	}
	d := o.diagnose(ctx, w, time.Now())
	if err := o.print(d); err != nil {
		return couldNotRun(err)
	}
	if d.Failed > 0 {
		return errChecksFailed
	}
	return nil
}

// read gathers the world: the hub's MultiClusterService and member
// Secrets, then every member.
func (o *diagnoseOptions) read(ctx context.Context, svc string) (*world, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	w := &world{namespace: ns, service: svc}
	cfg, err := o.hubConfig()
	if err != nil {
		return nil, err
	}
	hub, err := mcsclientset.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m, err := hub.McsV1alpha1().MultiClusterServices(ns).Get(ctx, svc, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil && !notServed(err):
		return nil, fmt.Errorf("the hub: %w", err)
	case err == nil:
		w.mcsvc = m
	}
	if err := o.findMembers(ctx, cfg); err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	w.hub = readHub(ctx, kube, o.controllerNamespace)
	for _, cluster := range o.members {
		ms := o.readMember(ctx, cluster, ns, svc)
		ms.credentials = o.credentials[cluster]
		w.members = append(w.members, ms)
	}
	return w, nil
}

// readMember reads cluster through its context; a member that cannot be
// reached is a state with its error, for reachCheck.
func (o *diagnoseOptions) readMember(ctx context.Context, cluster, ns, svc string) *memberState {
	cfg, err := o.memberConfig(cluster)
	if err != nil {
		return &memberState{cluster: cluster, err: err}
	}
	cfg.Timeout = 15 * time.Second // a member that hangs must not hang the diagnosis
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return &memberState{cluster: cluster, err: err}
	}
	mcs, err := mcsclient.NewForConfig(cfg)
	if err != nil {
		return &memberState{cluster: cluster, err: err}
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return &memberState{cluster: cluster, err: err}
	}
	return readMember(ctx, cluster, ns, svc, kube, mcs, dyn)
}

// diagnose runs every check in the path's order.
func (o *diagnoseOptions) diagnose(ctx context.Context, w *world, now time.Time) *Diagnosis {
	checks := append(hubChecks(w, now), hubCheck(w)...)
	for _, m := range w.members {
		checks = append(checks, o.memberChecks(ctx, m, now)...)
	}
	checks = append(checks, exportChecks(w)...)
	checks = append(checks, readyEndpointsCheck(w)...)
	for _, p := range w.providers() {
		if m := w.member(p); m != nil && m.err == nil {
			checks = append(checks, policyCheck(w, m)...)
		}
	}
	for _, c := range w.consumers() {
		checks = append(checks, o.consumerChecks(ctx, w, c, now)...)
	}
	sortByLink(checks)
	return summarize(w, checks)
}

// memberChecks are one member's access: reachable, credentials, the MCS
// API, the controller's RBAC.
func (o *diagnoseOptions) memberChecks(ctx context.Context, m *memberState, now time.Time) []Check {
	reach := o.reachCheck(m)
	if m.err != nil {
		return []Check{reach}
	}
	checks := []Check{reach}
	if m.credentials != nil {
		checks = append(checks, credentialCheck(m, o.contextHint(m.cluster), now))
	}
	return append(checks, crdCheck(m), rbacCheck(ctx, m, o.contextHint(m.cluster)))
}

// consumerChecks are what one consumer needs for the name to resolve, in
// the path's order.
func (o *diagnoseOptions) consumerChecks(ctx context.Context, w *world, cluster string, now time.Time) []Check {
	m := w.member(cluster)
	switch {
	case m == nil:
		return []Check{fail(linkMember, cluster, "registered", "the MultiClusterService names it, but it is not among the members (the hub's Secrets, its ClusterProfiles with --cluster-profile-namespace, or --members)", "kubectl mcs join "+cluster+" "+o.contextHint(cluster))}
	case m.err != nil:
		return nil // its reachability check says so
	}
	imp := importCheck(w, m)
	checks := []Check{imp}
	if m.imp != nil {
		checks = append(checks, derivedCheck(w, m))
		checks = append(checks, sliceChecks(w, m)...)
		checks = append(checks, leaseChecks(w, m, now)...)
		checks = append(checks, portsCheck(w, m)...)
	}
	run := probeCoreDNS(ctx, m)
	checks = append(checks, imageCheck(m, run), corefileCheck(m), corednsRBACCheck(ctx, m))
	checks = append(checks, readyChecks(m, run)...)
	checks = append(checks, nodeLocalCheck(m)...)
	if server, ok := o.dnsServers[cluster]; ok {
		checks = append(checks, dnsChecks(ctx, w, m, server, now)...)
	}
	return checks
}

// linkOrder is the path's order of the links.
var linkOrder = []string{linkHub, linkMember, linkExport, linkImport, linkDerived, linkSlices, linkLease, linkCoreDNS, linkDNS, linkConnect}

// sortByLink puts the checks in the path's order, each link's by cluster,
// keeping the order of each cluster's checks within a link.
func sortByLink(checks []Check) {
	slices.SortStableFunc(checks, func(a, b Check) int {
		if d := slices.Index(linkOrder, a.Link) - slices.Index(linkOrder, b.Link); d != 0 {
			return d
		}
		return strings.Compare(a.Cluster, b.Cluster)
	})
}

func summarize(w *world, checks []Check) *Diagnosis {
	d := &Diagnosis{Namespace: w.namespace, Service: w.service, Checks: checks}
	for i, c := range checks {
		switch c.Verdict {
		case verdictFail:
			d.Failed++
			if d.FirstBroken == nil {
				d.FirstBroken = &checks[i]
			}
		case verdictUnknown:
			d.Unknown++
		}
	}
	return d
}

func (o *diagnoseOptions) print(d *Diagnosis) error {
	if o.output == "json" {
		return encode(o.streams.Out, o.output, d)
	}
	return d.list(o.streams.Out)
}

// list prints each verdict, failures with their fix, then the first
// broken link.
func (d *Diagnosis) list(w io.Writer) error {
	for _, c := range d.Checks {
		where := c.Link
		if c.Cluster != "" {
			where += " " + c.Cluster
		}
		switch c.Verdict {
		case verdictOK:
			fmt.Fprintf(w, "ok    %s: %s\n", where, c.Name)
			continue
		case verdictFail:
			mark := "FAIL"
			if c.Severity == severityWarning {
				mark = "WARN"
			}
			fmt.Fprintf(w, "%s  %s: %s: %s\n", mark, where, c.Name, c.Problem)
		default:
			fmt.Fprintf(w, "?     %s: %s: cannot tell: %s\n", where, c.Name, c.Problem)
		}
		if c.Fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", c.Fix)
		}
	}
	fmt.Fprintf(w, "%d checks, %d failed, %d unknown\n", len(d.Checks), d.Failed, d.Unknown)
	if c := d.FirstBroken; c != nil {
		_, err := fmt.Fprintf(w, "first broken link: %s: %s: %s\n  fix: %s\n", strings.TrimSpace(c.Link+" "+c.Cluster), c.Name, c.Problem, c.Fix)
		return err
	}
	return nil
}

// crdCheck: the member serves the MCS API.
func crdCheck(m *memberState) Check {
	name := "serves ServiceImport and ServiceExport (multicluster.x-k8s.io)"
	var served []string
	for _, v := range []string{"v1beta1", "v1alpha1"} {
		res, err := m.kube.Discovery().ServerResourcesForGroupVersion("multicluster.x-k8s.io/" + v)
		if err != nil {
			continue
		}
		var names []string
		for _, r := range res.APIResources {
			names = append(names, r.Name)
		}
		if slices.Contains(names, "serviceimports") && slices.Contains(names, "serviceexports") {
			served = append(served, v)
		}
	}
	if len(served) == 0 {
		return fail(linkMember, m.cluster, name, "no version of the MCS API is served", "apply deploy/mcs-api to the member")
	}
	return pass(linkMember, m.cluster, name+" "+strings.Join(served, ", "))
}

// rbacCheck: the controller's ServiceAccount may do what deploy/member
// grants it, each permission asked of the API server.
func rbacCheck(ctx context.Context, m *memberState, contextHint string) Check {
	name := "the controller's ServiceAccount has deploy/member's permissions"
	objs, err := decode(member.ControllerRBAC)
	if err != nil {
		return unknown(linkMember, m.cluster, name, err.Error(), "")
	}
	var attrs []authorizationv1.ResourceAttributes
	for _, u := range objs {
		a, err := permissions(u)
		if err != nil {
			return unknown(linkMember, m.cluster, name, err.Error(), "")
		}
		attrs = append(attrs, a...)
	}
	denied, err := deniedOf(ctx, m.kube, "system:serviceaccount:"+memberNamespace+":"+serviceAccount, attrs)
	if err != nil {
		return unknown(linkMember, m.cluster, name, "SubjectAccessReview: "+err.Error(), "")
	}
	if len(denied) > 0 {
		return fail(linkMember, m.cluster, name, "denied: "+strings.Join(denied, ", "), "kubectl mcs join "+m.cluster+" "+contextHint+" (it applies deploy/member's RBAC)")
	}
	return pass(linkMember, m.cluster, name)
}

// permissions are what a Role or ClusterRole grants, one resource
// attribute per group, resource and verb.
func permissions(u *unstructured.Unstructured) ([]authorizationv1.ResourceAttributes, error) {
	if u.GetKind() != "ClusterRole" && u.GetKind() != "Role" {
		return nil, nil
	}
	var role rbacv1.ClusterRole // a Role's rules have the same shape
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	var out []authorizationv1.ResourceAttributes
	for _, rule := range role.Rules {
		for _, group := range rule.APIGroups {
			for _, resource := range rule.Resources {
				res, sub, _ := strings.Cut(resource, "/")
				for _, verb := range rule.Verbs {
					for _, name := range orAny(rule.ResourceNames) {
						out = append(out, authorizationv1.ResourceAttributes{Namespace: u.GetNamespace(), Group: group, Resource: res, Subresource: sub, Verb: verb, Name: name})
					}
				}
			}
		}
	}
	return out, nil
}

// orAny is a rule's resourceNames, or "" (any name) when it has none.
func orAny(names []string) []string {
	if len(names) == 0 {
		return []string{""}
	}
	return names
}
