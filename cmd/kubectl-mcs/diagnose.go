package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/coredns-mcs/coredns-mcs/deploy/member"
)

type diagnoseOptions struct {
	statusOptions
	dnsServers map[string]string
}

func newDiagnose(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &diagnoseOptions{statusOptions: statusOptions{hubOptions: hubOptions{flags: flags, streams: streams}}}
	cmd := &cobra.Command{
		Use:   "diagnose SERVICE [-n NAMESPACE] [--hub-context HUB] [--members A,B] [--dns MEMBER=HOST:PORT]",
		Short: "Check what a multi-cluster service needs, member by member, and say how to fix what fails",
		Long: `diagnose runs checks for SERVICE (in -n's namespace), each with a verdict and, when it fails, a fix:
every member is reachable; its CoreDNS Corefile's mcs "cluster" is the name it is registered under;
it serves the MCS API's ServiceImport and ServiceExport; the controller's ServiceAccount may do there
what it must (a SubjectAccessReview per permission of deploy/member); every imported slice is
current with its source; every provider's Lease is fresh; and, for each --dns given, that
member's coredns-mcs answers the service's names. It exits 1 when a check fails.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), args[0]) },
	}
	o.addFlags(cmd)
	cmd.Flags().StringSliceVar(&o.members, "members", nil, "the member clusters (default: the hub's member Secrets)")
	cmd.Flags().StringVar(&o.controllerNamespace, "controller-namespace", memberNamespace, "the controller's namespace on the hub, of the member Secrets")
	cmd.Flags().StringToStringVar(&o.dnsServers, "dns", nil, "MEMBER=HOST:PORT of a member's coredns-mcs to ask, where this machine reaches it")
	return cmd
}

// check is one verdict.
type check struct {
	name, problem, fix string // problem "" is a pass
}

// errChecksFailed makes the command exit 1 after the verdicts are printed.
var errChecksFailed = errors.New("checks failed")

func (o *diagnoseOptions) run(ctx context.Context, svc string) error {
	var checks []check
	r, err := o.collect(ctx, svc, func(mr MemberReport) { checks = append(checks, o.memberChecks(ctx, mr)...) })
	if err != nil {
		return err
	}
	checks = append(checks, freshness(r)...)
	checks = append(checks, o.dnsChecks(ctx, r)...)
	return report(o.streams.Out, checks)
}

// memberChecks are the checks of one member's setup.
func (o *diagnoseOptions) memberChecks(ctx context.Context, mr MemberReport) []check {
	reach := check{name: mr.Cluster + ": reachable"}
	if mr.Error != "" {
		reach.problem, reach.fix = mr.Error, "give your kubeconfig a context named "+mr.Cluster+" that reaches the member"
		return []check{reach}
	}
	c := genericclioptions.NewConfigFlags(false)
	c.KubeConfig, c.Context = o.flags.KubeConfig, &mr.Cluster
	cfg, err := c.ToRESTConfig()
	if err != nil {
		return []check{{name: reach.name, problem: err.Error()}}
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return []check{{name: reach.name, problem: err.Error()}}
	}
	checks := []check{reach, corefileCheck(ctx, kube, mr.Cluster), crdCheck(ctx, kube, mr.Cluster), rbacCheck(ctx, kube, mr.Cluster)}
	if mr.Credentials != nil {
		checks = append(checks, credentialCheck(mr, time.Now()))
	}
	return checks
}

// corefileRE finds the mcs stanza's cluster option.
var corefileRE = regexp.MustCompile(`(?m)^\s*cluster\s+(\S+)\s*$`)

// corefileCheck: CoreDNS's Corefile runs mcs under the member's name.
func corefileCheck(ctx context.Context, kube kubernetes.Interface, cluster string) check {
	c := check{name: cluster + ": CoreDNS's Corefile names it " + cluster}
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		c.problem, c.fix = "ConfigMap kube-system/coredns: "+err.Error(), "install coredns-mcs with deploy/overlays/<member> (docs/install.md)"
		return c
	}
	corefile := cm.Data["Corefile"]
	m := corefileRE.FindStringSubmatch(corefile)
	switch {
	case !strings.Contains(corefile, "mcs "):
		c.problem, c.fix = "the Corefile has no mcs stanza", "apply deploy/overlays/"+cluster+" (its Corefile is corefile/Corefile with cluster "+cluster+")"
	case m == nil:
		c.problem, c.fix = "the mcs stanza has no cluster option (the ClusterProperty then names the cluster)", "set `cluster "+cluster+"` in the mcs stanza"
	case m[1] != cluster:
		c.problem, c.fix = fmt.Sprintf("the mcs stanza says cluster %s", m[1]), "set `cluster "+cluster+"` in the mcs stanza: it must be the name the member is registered under, or its own imported endpoints count as remote"
	}
	return c
}

// crdCheck: the member serves the MCS API.
func crdCheck(ctx context.Context, kube kubernetes.Interface, cluster string) check {
	c := check{name: cluster + ": serves ServiceImport and ServiceExport (multicluster.x-k8s.io)"}
	var served []string
	for _, v := range []string{"v1beta1", "v1alpha1"} {
		res, err := kube.Discovery().ServerResourcesForGroupVersion("multicluster.x-k8s.io/" + v)
		if err != nil {
			continue
		}
		names := []string{}
		for _, r := range res.APIResources {
			names = append(names, r.Name)
		}
		if slices.Contains(names, "serviceimports") && slices.Contains(names, "serviceexports") {
			served = append(served, v)
		}
	}
	if len(served) == 0 {
		c.problem, c.fix = "no version of the MCS API is served", "apply deploy/mcs-api to the member"
	} else {
		c.name += " " + strings.Join(served, ", ")
	}
	return c
}

// rbacCheck: the controller's ServiceAccount may do what deploy/member
// grants it, each permission asked of the API server.
func rbacCheck(ctx context.Context, kube kubernetes.Interface, cluster string) check {
	c := check{name: cluster + ": the controller's ServiceAccount has deploy/member's permissions"}
	objs, err := decode(member.ControllerRBAC)
	if err != nil {
		c.problem = err.Error()
		return c
	}
	user := "system:serviceaccount:" + memberNamespace + ":" + serviceAccount
	var denied []string
	for _, u := range objs {
		attrs, err := permissions(u)
		if err != nil {
			c.problem = err.Error()
			return c
		}
		for _, attr := range attrs {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attr}}
			got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err != nil {
				c.problem = "SubjectAccessReview: " + err.Error()
				return c
			}
			if !got.Status.Allowed {
				denied = append(denied, strings.TrimSuffix(fmt.Sprintf("%s %s/%s/%s", attr.Verb, attr.Group, attr.Resource, attr.Subresource), "/"))
			}
		}
	}
	if len(denied) > 0 {
		c.problem, c.fix = "denied: "+strings.Join(denied, ", "), "kubectl mcs join "+cluster+" --context "+cluster+" (it applies deploy/member's RBAC)"
	}
	return c
}

// freshness: imported slices current, providers' Leases fresh.
func freshness(r *Report) []check {
	var out []check
	for _, m := range r.Members {
		for _, s := range m.Imported {
			c := check{name: fmt.Sprintf("%s: imported slice %s is current with %s", m.Cluster, s.Name, s.Source)}
			if !s.Current {
				c.problem, c.fix = "its source-generation is not its source slice's", "look at mcs-controller's log and mcs_member_reachable{cluster=\""+s.Source+"\"}; a slice whose source is gone is removed at the next sync"
			}
			out = append(out, c)
		}
		for p, age := range m.LeaseAges {
			c := check{name: fmt.Sprintf("%s: Lease source-%s is fresh", m.Cluster, p)}
			if age > staleAfter {
				c.problem, c.fix = fmt.Sprintf("renewed %d s ago", age), "the controller cannot see "+p+": check mcs_member_reachable and its log (docs/troubleshooting.md, stale endpoints)"
			}
			out = append(out, c)
		}
	}
	return out
}

// staleAfter is the controller's default source Lease duration, in seconds.
const staleAfter = 20

// dnsChecks ask each --dns server for the service's names.
func (o *diagnoseOptions) dnsChecks(ctx context.Context, r *Report) []check {
	var out []check
	for _, cluster := range slices.Sorted(maps.Keys(o.dnsServers)) {
		for _, zone := range []string{"cluster.local.", "clusterset.local."} {
			name := fmt.Sprintf("%s.%s.svc.%s", r.Service, r.Namespace, zone)
			c := check{name: fmt.Sprintf("%s: coredns-mcs answers %s", cluster, name)}
			answers, err := ask(ctx, o.dnsServers[cluster], name)
			switch {
			case err != nil:
				c.problem, c.fix = err.Error(), "kubectl -n kube-system logs deploy/coredns | grep plugin/mcs (docs/troubleshooting.md)"
			default:
				c.name += ": " + strings.Join(answers, ", ")
			}
			out = append(out, c)
		}
	}
	return out
}

func ask(ctx context.Context, server, name string) ([]string, error) {
	if _, _, err := net.SplitHostPort(server); err != nil {
		return nil, err
	}
	c := &dns.Client{Timeout: 2 * time.Second}
	resp, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA), server)
	if err != nil {
		return nil, err
	}
	if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) == 0 {
		return nil, fmt.Errorf("%s, %d answers", dns.RcodeToString[resp.Rcode], len(resp.Answer))
	}
	var out []string
	for _, rr := range resp.Answer {
		if a, ok := rr.(*dns.A); ok {
			out = append(out, a.A.String())
		}
	}
	return out, nil
}

// report prints each verdict, failures with their fix, and fails when one did.
func report(w io.Writer, checks []check) error {
	failed := 0
	for _, c := range checks {
		if c.problem == "" {
			fmt.Fprintf(w, "ok    %s\n", c.name)
			continue
		}
		failed++
		fmt.Fprintf(w, "FAIL  %s: %s\n", c.name, c.problem)
		if c.fix != "" {
			fmt.Fprintf(w, "      fix: %s\n", c.fix)
		}
	}
	fmt.Fprintf(w, "%d checks, %d failed\n", len(checks), failed)
	if failed > 0 {
		return errChecksFailed
	}
	return nil
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
