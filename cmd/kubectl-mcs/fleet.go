package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// FleetReport is status without a service: the problems first.
type FleetReport struct {
	Problems []string       `json:"problems"`
	Members  []FleetMember  `json:"members"`
	Services []FleetService `json:"services"`
}

// FleetMember is whether a member answers, its version, and the
// credentials of its hub Secret (none with --members).
type FleetMember struct {
	Cluster     string            `json:"cluster"`
	Version     string            `json:"version,omitempty"`
	Error       string            `json:"error,omitempty"`
	Credentials *CredentialReport `json:"credentials,omitempty"`
}

// FleetService is a MultiClusterService and whether it has synced: every
// condition True at its generation.
type FleetService struct {
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Strategy  string   `json:"strategy"`
	Synced    bool     `json:"synced"`
	NotTrue   []string `json:"notTrue,omitempty"`
}

func (o *statusOptions) fleet(ctx context.Context) error {
	var r FleetReport
	if err := o.fleetServices(ctx, &r); err != nil {
		return err
	}
	for _, m := range o.members {
		fm := fleetMember(&o.hubOptions, m)
		fm.Credentials = o.credentials[m]
		for _, p := range []string{fm.Error, fm.Credentials.problem(time.Now())} {
			if p != "" {
				r.Problems = append(r.Problems, fmt.Sprintf("member %s: %s", m, p))
			}
		}
		r.Members = append(r.Members, fm)
	}
	for _, s := range r.Services {
		for _, c := range s.NotTrue {
			r.Problems = append(r.Problems, fmt.Sprintf("MultiClusterService %s/%s: %s", s.Namespace, s.Name, c))
		}
	}
	return o.printFleet(&r)
}

// fleetServices reads every MultiClusterService of the hub, and the
// members unless --members.
func (o *statusOptions) fleetServices(ctx context.Context, r *FleetReport) error {
	cfg, err := o.hubConfig()
	if err != nil {
		return err
	}
	if err := o.findMembers(ctx, cfg); err != nil {
		return err
	}
	hub, err := mcsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	list, err := hub.McsV1alpha1().MultiClusterServices(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("the hub: %w", err)
	}
	for _, m := range list.Items {
		r.Services = append(r.Services, fleetService(&m))
	}
	slices.SortFunc(r.Services, func(a, b FleetService) int {
		if a.Synced != b.Synced { // the worst first
			if !a.Synced {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return nil
}

func fleetService(m *v1alpha1.MultiClusterService) FleetService {
	s := FleetService{Namespace: m.Namespace, Name: m.Name, Strategy: string(m.Spec.Strategy)}
	switch {
	case m.DeletionTimestamp != nil:
		s.NotTrue = []string{fmt.Sprintf("being deleted since %s: waiting for mcs-controller to clean up and drop its finalizer (is it running and leading?)", m.DeletionTimestamp.UTC().Format(time.RFC3339))}
	case len(m.Status.Conditions) == 0:
		s.NotTrue = []string{"no conditions yet: is mcs-controller running and leading?"}
	}
	for _, c := range m.Status.Conditions {
		switch {
		case m.DeletionTimestamp != nil:
		case c.Status != metav1.ConditionTrue:
			s.NotTrue = append(s.NotTrue, conditions([]metav1.Condition{c})...)
		case c.ObservedGeneration != m.Generation:
			s.NotTrue = append(s.NotTrue, fmt.Sprintf("%s is of generation %d, not %d: mcs-controller has not synced the last change", c.Type, c.ObservedGeneration, m.Generation))
		}
	}
	s.Synced = len(s.NotTrue) == 0
	return s
}

// fleetMember asks member, through its context, for its version.
func fleetMember(o *hubOptions, cluster string) FleetMember {
	out := FleetMember{Cluster: cluster}
	dc, err := o.contextFlags(o.contextOf(cluster)).ToDiscoveryClient()
	if err == nil {
		dc.Invalidate()
		v, verr := dc.ServerVersion()
		if err = verr; err == nil {
			out.Version = v.GitVersion
		}
	}
	if err != nil {
		out.Error = err.Error()
	}
	return out
}

func (o *statusOptions) printFleet(r *FleetReport) error {
	if o.output != "" {
		return encode(o.streams.Out, o.output, r)
	}
	return r.table(o.streams.Out)
}

func (r *FleetReport) table(w io.Writer) error {
	if len(r.Problems) == 0 {
		fmt.Fprintln(w, "No problems.")
	} else {
		fmt.Fprintf(w, "Problems:\n  %s\n", strings.Join(r.Problems, "\n  "))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\nMEMBER\tVERSION\tREACHABLE\tCREDENTIALS EXPIRE")
	for _, m := range r.Members {
		fmt.Fprintf(tw, "%s\t%s\t%t\t%s\n", m.Cluster, orDash(m.Version), m.Error == "", m.Credentials)
	}
	fmt.Fprintln(tw, "\nMULTICLUSTERSERVICE\tSTRATEGY\tSYNCED")
	for _, s := range r.Services {
		fmt.Fprintf(tw, "%s/%s\t%s\t%t\n", s.Namespace, s.Name, s.Strategy, s.Synced)
	}
	return tw.Flush()
}
