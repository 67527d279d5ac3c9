package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

type statusOptions struct {
	hubOptions
	memberSources
	credentials map[string]*CredentialReport // by member, from its Secret
	output      string
}

func newStatus(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &statusOptions{hubOptions: hubOptions{flags: flags, streams: streams}}
	cmd := &cobra.Command{
		Use:   "status [SERVICE] [-n NAMESPACE] [--hub-context HUB] [--members A,B]",
		Short: "Show what every member holds of a multi-cluster service",
		Long: `status shows, per member, what it holds of SERVICE (in -n's namespace): its Service and ready
endpoints, its ServiceExport's conditions, its ServiceImport (strategy, VIPs, providers), derived-<svc>'s
VIP, each imported EndpointSlice and whether it is current with its source (the source's generation),
and the age of each provider's Lease there; and the hub's MultiClusterService with its conditions.
Members are the hub's member Secrets (in --controller-namespace) and, with --cluster-profile-namespace,
its ClusterProfiles there, as the controller registers them; or --members. Each is reached with
the kubeconfig context of its name, or the one --member-context CLUSTER=CONTEXT maps it to. -n is
the service's namespace, as in every kubectl mcs command (default: the kubeconfig context's).

Without SERVICE, a summary of the fleet: the problems first (members that cannot be reached, and
MultiClusterServices, of every namespace, with a condition that is not True at their generation),
then every member and every MultiClusterService.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.output != "" && o.output != "json" && o.output != "yaml" {
				return fmt.Errorf("-o %s: json or yaml", o.output)
			}
			if len(args) == 0 {
				return o.fleet(cmd.Context())
			}
			return o.run(cmd.Context(), args[0])
		},
	}
	o.addFlags(cmd)
	o.addMemberContexts(cmd)
	o.addMemberFlags(cmd)
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json or yaml; a table without it")
	return cmd
}

// Report is what status shows of one service.
type Report struct {
	Namespace           string            `json:"namespace"`
	Service             string            `json:"service"`
	MultiClusterService *HubReport        `json:"multiClusterService,omitempty"`
	Members             []MemberReport    `json:"members"`
	sources             map[string]source // by cluster: what imported slices are compared with
}

// HubReport is the hub's MultiClusterService of the service.
type HubReport struct {
	Strategy   string   `json:"strategy"`
	Conditions []string `json:"conditions"` // Type=Status (Reason): message
}

// MemberReport is what one member holds of the service.
type MemberReport struct {
	Cluster        string          `json:"cluster"`
	Error          string          `json:"error,omitempty"`
	Service        bool            `json:"service"`
	ReadyEndpoints int             `json:"readyEndpoints"`
	Export         []string        `json:"export,omitempty"` // its conditions
	Import         *ImportReport   `json:"import,omitempty"`
	DerivedVIPs    []string        `json:"derivedVIPs,omitempty"`
	Imported       []ImportedSlice `json:"imported,omitempty"`
	LeaseAges      map[string]int  `json:"leaseAgeSeconds,omitempty"` // by provider
	// Credentials are those of its hub Secret; none with --members.
	Credentials *CredentialReport `json:"credentials,omitempty"`
}

// ImportReport is a member's ServiceImport.
type ImportReport struct {
	Strategy string   `json:"strategy,omitempty"`
	IPs      []string `json:"ips,omitempty"`
	Clusters []string `json:"clusters"`
}

// ImportedSlice is one imported EndpointSlice.
type ImportedSlice struct {
	Name           string `json:"name"`
	Source         string `json:"source"`
	ReadyEndpoints int    `json:"readyEndpoints"`
	Current        bool   `json:"current"` // its source-generation is the source slice's
	generation     string // its source-generation annotation
}

// source is a provider's own slices of the service: generation by name.
type source map[string]int64

func (o *statusOptions) run(ctx context.Context, svc string) error {
	r, err := o.collect(ctx, svc, func(MemberReport) {})
	if err != nil {
		return err
	}
	return o.print(r)
}

// collect reads what the hub and every member hold of svc (in -n's
// namespace); visit sees each member as it is read.
func (o *statusOptions) collect(ctx context.Context, svc string, visit func(MemberReport)) (*Report, error) {
	ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, err
	}
	r := &Report{Namespace: ns, Service: svc, sources: map[string]source{}}
	if err := o.hubReport(ctx, r); err != nil {
		return nil, err
	}
	for _, m := range o.members {
		mr := r.member(ctx, &o.hubOptions, m)
		mr.Credentials = o.credentials[m]
		r.Members = append(r.Members, mr)
		visit(mr)
	}
	r.markCurrent()
	return r, nil
}

// hubReport reads the MultiClusterService, and finds the members.
func (o *statusOptions) hubReport(ctx context.Context, r *Report) error {
	cfg, err := o.hubConfig()
	if err != nil {
		return err
	}
	hub, err := mcsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	m, err := hub.McsV1alpha1().MultiClusterServices(r.Namespace).Get(ctx, r.Service, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("the hub: %w", err)
	default:
		r.MultiClusterService = &HubReport{Strategy: string(m.Spec.Strategy), Conditions: conditions(m.Status.Conditions)}
	}
	return o.findMembers(ctx, cfg)
}

// findMembers are the members the hub registers, unless --members.
func (o *statusOptions) findMembers(ctx context.Context, cfg *rest.Config) error {
	if len(o.members) > 0 {
		return nil
	}
	r, err := o.registeredAt(ctx, cfg, o.controllerNamespace)
	if err != nil {
		return err
	}
	o.members, o.credentials = r.names, credentialsOf(r.secrets)
	return nil
}

// member reads what cluster holds, through its context.
func (r *Report) member(ctx context.Context, o *hubOptions, cluster string) MemberReport {
	out := MemberReport{Cluster: cluster}
	cfg, err := o.memberConfig(cluster)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err == nil {
		var mcs mcsclient.Interface
		if mcs, err = mcsclient.NewForConfig(cfg); err == nil {
			err = r.read(ctx, kube, mcs, &out)
		}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

func (r *Report) read(ctx context.Context, kube kubernetes.Interface, mcs mcsclient.Interface, out *MemberReport) error {
	ns, name := r.Namespace, r.Service
	if _, err := kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		out.Service = true
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	if d, err := kube.CoreV1().Services(ns).Get(ctx, api.DerivedPrefix+name, metav1.GetOptions{}); err == nil {
		out.DerivedVIPs = d.Spec.ClusterIPs
	}
	own, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + name})
	if err != nil {
		return err
	}
	src := source{}
	for _, s := range own.Items {
		src[s.Name] = s.Generation
		out.ReadyEndpoints += ready(&s)
	}
	r.sources[out.Cluster] = src
	imported, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: api.ImportedSelector(name)})
	if err != nil {
		return err
	}
	for _, s := range imported.Items {
		out.Imported = append(out.Imported, ImportedSlice{Name: s.Name, Source: s.Labels[mcsv1b1.LabelSourceCluster], ReadyEndpoints: ready(&s), generation: s.Annotations[api.AnnotationSourceGeneration]})
	}
	if e, err := mcs.MulticlusterV1beta1().ServiceExports(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		out.Export = conditions(e.Status.Conditions)
	}
	if i, err := mcs.MulticlusterV1beta1().ServiceImports(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
		out.Import = &ImportReport{Strategy: i.Annotations[api.AnnotationStrategy], IPs: i.Spec.IPs}
		for _, c := range i.Status.Clusters {
			out.Import.Clusters = append(out.Import.Clusters, c.Cluster)
		}
		out.LeaseAges = leaseAges(ctx, kube, out.Import.Clusters)
	}
	return nil
}

// markCurrent compares each imported slice's source-generation with its
// source's slice, once every member has been read.
func (r *Report) markCurrent() {
	for i := range r.Members {
		for j := range r.Members[i].Imported {
			s := &r.Members[i].Imported[j]
			for name, gen := range r.sources[s.Source] {
				if desired.ImportedName(s.Source, name) == s.Name {
					s.Current = s.generation == strconv.FormatInt(gen, 10)
				}
			}
		}
	}
}

func ready(s *discoveryv1.EndpointSlice) int {
	n := 0
	for _, e := range s.Endpoints {
		if e.Conditions.Ready == nil || *e.Conditions.Ready {
			n++
		}
	}
	return n
}

// leaseAges are the seconds since each provider's Lease was renewed here.
func leaseAges(ctx context.Context, kube kubernetes.Interface, providers []string) map[string]int {
	out := map[string]int{}
	for _, p := range providers {
		l, err := kube.CoordinationV1().Leases(api.LeaseNamespace).Get(ctx, api.LeasePrefix+p, metav1.GetOptions{})
		if err == nil && l.Spec.RenewTime != nil {
			out[p] = int(time.Since(l.Spec.RenewTime.Time).Seconds())
		}
	}
	return out
}

func conditions(cs []metav1.Condition) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s (%s): %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return out
}

func (o *statusOptions) print(r *Report) error {
	if o.output != "" {
		return encode(o.streams.Out, o.output, r)
	}
	return r.table(o.streams.Out)
}

// encode writes v to w as -o says: json or yaml. status, diagnose and
// verify share it, so that their machine-readable output is one format.
func encode(w io.Writer, output string, v any) error {
	var b []byte
	var err error
	if output == "yaml" {
		b, err = yaml.Marshal(v)
	} else {
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	}
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// table is the report for a person: one line per member, then each
// member's imported slices and the conditions.
func (r *Report) table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "MEMBER\tSERVICE\tREADY\tIMPORT\tVIP\tPROVIDERS\tIMPORTED (CURRENT)\tLEASE AGES\tCREDENTIALS EXPIRE\n")
	for _, m := range r.Members {
		if m.Error != "" {
			fmt.Fprintf(tw, "%s\t%s\n", m.Cluster, "error: "+m.Error)
			continue
		}
		imp, vip, providers := "-", "-", "-"
		if m.Import != nil {
			imp, vip, providers = orDash(m.Import.Strategy), orDash(strings.Join(m.Import.IPs, ",")), strings.Join(m.Import.Clusters, ",")
		}
		current := 0
		for _, s := range m.Imported {
			if s.Current {
				current++
			}
		}
		fmt.Fprintf(tw, "%s\t%t\t%d\t%s\t%s\t%s\t%d (%d)\t%s\t%s\n", m.Cluster, m.Service, m.ReadyEndpoints, imp, vip, providers, len(m.Imported), current, ages(m.LeaseAges), m.Credentials)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if h := r.MultiClusterService; h != nil {
		fmt.Fprintf(w, "\nMultiClusterService %s/%s (%s):\n  %s\n", r.Namespace, r.Service, h.Strategy, strings.Join(h.Conditions, "\n  "))
	}
	for _, m := range r.Members {
		if len(m.Export) > 0 {
			fmt.Fprintf(w, "\nServiceExport in %s:\n  %s\n", m.Cluster, strings.Join(m.Export, "\n  "))
		}
	}
	return nil
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ages(m map[string]int) string {
	var parts []string
	for _, p := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %ds", p, m[p]))
	}
	return orDash(strings.Join(parts, ","))
}
