package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
)

// Default images of verify's pods: what the lab runs too (test/lab/README.md).
const (
	defaultServerImage = "docker.io/alpine/socat:1.7.4.4"
	defaultClientImage = "docker.io/nicolaka/netshoot:v0.15"
	defaultNamespace   = "mcs-verify"
)

type verifyOptions struct {
	statusOptions
	providers, consumers     []string
	serverImage, clientImage string
	timeout, cleanupTimeout  time.Duration
}

func newVerify(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &verifyOptions{statusOptions: statusOptions{hubOptions: hubOptions{flags: flags, streams: streams}}}
	cmd := &cobra.Command{
		Use:   "verify [-n NAMESPACE] [--providers A,B] [--consumers A,B] [--server-image IMAGE] [--client-image IMAGE] [-o json]",
		Short: "Test the live fleet end to end: deploy a server and a client, resolve every name, connect, clean up",
		Long: `verify is the connectivity test of a live fleet. In -n's namespace (default mcs-verify; made
where it is missing, and then deleted) it deploys a server pod (StatefulSet mcs-verify, one socat
answering on 8080 with its cluster's name) in each provider, and a client pod (mcs-verify-client:
dig and nc) in each consumer, and exports the server three ways:

  mcs-verify           ClusterIP  a ServiceExport in each provider (the MCS API)
  mcs-verify-local     ClusterIP  a MultiClusterService on the hub, LocalFirst
  mcs-verify-headless  headless   a MultiClusterService on the hub, RemoteAndLocal

From each consumer's client, through its cluster DNS (the pod's resolv.conf) and its kube-proxy,
it checks that every name answers what the strategy says: <svc>.<ns>.svc.clusterset.local A, AAAA
and SRV (the ServiceImport's IPs; a headless import's endpoints, a record per endpoint), the
native <svc>.<ns>.svc.cluster.local (LocalFirst: the consumer's own server while it has one, else
the others'; RemoteAndLocal headless: every provider's endpoints), the per-pod names
mcs-verify-0.<cluster>.mcs-verify-headless.<ns>.svc.clusterset.local and
mcs-verify-0.mcs-verify-headless.<ns>.svc.cluster.local, and that a connection to each VIP, and to
each provider's pod by its own name, reaches a server of the right cluster. Then, in each consumer
that also provides, it scales its server to zero: the LocalFirst name must fail over to the other
providers, and come back when the server does. The answer option of each consumer's Corefile
(kube-system/coredns: vip, the default, or endpoints) is read to know which answer is right.

Last, and also when it is interrupted (Ctrl-C) or fails, it deletes everything it made: every
object carries app.kubernetes.io/managed-by=kubectl-mcs-verify, and each run first deletes what an
earlier one left. It needs to create Namespaces, StatefulSets, Pods, Services and ServiceExports
in the members, exec into pods, and create MultiClusterServices on the hub.

A table of the checks, the failures' problems below it; -o json prints {"namespace", "providers",
"consumers", "checks": [{"cluster", "check", "target", "ok", "want", "got", "about", "problem",
"seconds"}], "failed"}. It exits 0 when every check passed and 1 when one failed, or when it
could not run or was interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.output != "" && o.output != "json" {
				return fmt.Errorf("-o %s: json, or a table without it", o.output)
			}
			ns := defaultNamespace
			if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
				ns = f.Value.String()
			}
			return o.run(cmd.Context(), ns)
		},
	}
	o.addFlags(cmd)
	o.addMemberContexts(cmd)
	o.addMemberFlags(cmd)
	cmd.Flags().StringSliceVar(&o.providers, "providers", nil, "the members that run a server (default: every member)")
	cmd.Flags().StringSliceVar(&o.consumers, "consumers", nil, "the members that run a client and are checked (default: every member)")
	cmd.Flags().StringVar(&o.serverImage, "server-image", defaultServerImage, "the servers' image: it runs socat (a mirror of alpine/socat)")
	cmd.Flags().StringVar(&o.clientImage, "client-image", defaultClientImage, "the clients' image: it runs /bin/sh, dig and nc (a mirror of nicolaka/netshoot)")
	cmd.Flags().DurationVar(&o.timeout, "timeout", time.Minute, "how long each step may take: the pods to be ready, the imports to come, a name to answer as it should")
	cmd.Flags().DurationVar(&o.cleanupTimeout, "cleanup-timeout", 2*time.Minute, "how long the cleanup may take, also after an interruption")
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "json; a table without it")
	return cmd
}

// Verification is what verify found, as -o json prints it.
type Verification struct {
	Namespace string        `json:"namespace"`
	Providers []string      `json:"providers"`
	Consumers []string      `json:"consumers"`
	Checks    []VerifyCheck `json:"checks"`
	Failed    int           `json:"failed"`
}

// VerifyCheck is one check: a step of the run, a name's answer, or a
// connection.
type VerifyCheck struct {
	Cluster string   `json:"cluster,omitempty"` // where it ran: a consumer for a probe
	Check   string   `json:"check"`
	Target  string   `json:"target,omitempty"`
	OK      bool     `json:"ok"`
	Want    []string `json:"want,omitempty"`
	Got     []string `json:"got,omitempty"`
	About   string   `json:"about,omitempty"` // why want is right
	Problem string   `json:"problem,omitempty"`
	Seconds float64  `json:"seconds,omitempty"` // until it answered as it should
}

func (v *Verification) add(checks ...VerifyCheck) {
	v.Checks = append(v.Checks, checks...)
	for _, c := range checks {
		if !c.OK {
			v.Failed++
		}
	}
}

func (o *verifyOptions) run(ctx context.Context, ns string) error {
	r, err := o.connect(ctx, ns)
	if err != nil {
		return err
	}
	v := r.verify(ctx, o.cleanupTimeout, o.streams.ErrOut)
	if err := o.print(v); err != nil {
		return err
	}
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("interrupted: %w", context.Cause(ctx))
	case v.Failed > 0:
		return errChecksFailed
	}
	return nil
}

// connect makes the clients of the hub and of every provider and consumer.
func (o *verifyOptions) connect(ctx context.Context, ns string) (*verifyRun, error) {
	cfg, err := o.hubConfig()
	if err != nil {
		return nil, err
	}
	r := &verifyRun{namespace: ns, members: map[string]*verifyMember{}, serverImage: o.serverImage, clientImage: o.clientImage, timeout: o.timeout, poll: time.Second}
	if r.hub, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if r.hubMCS, err = mcsclientset.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if err := o.findMembers(ctx, cfg); err != nil {
		return nil, err
	}
	if r.providers, err = o.among("--providers", o.providers); err != nil {
		return nil, err
	}
	if r.consumers, err = o.among("--consumers", o.consumers); err != nil {
		return nil, err
	}
	configs := map[string]*rest.Config{}
	for _, c := range o.members {
		if configs[c], err = o.memberConfig(c); err != nil {
			return nil, err
		}
		m := &verifyMember{}
		if m.kube, err = kubernetes.NewForConfig(configs[c]); err != nil {
			return nil, err
		}
		if m.mcs, err = mcsclient.NewForConfig(configs[c]); err != nil {
			return nil, err
		}
		r.members[c] = m
	}
	r.exec = podExec(configs)
	return r, nil
}

// among checks that clusters (flag's) are members; none is every member.
func (o *verifyOptions) among(flag string, clusters []string) ([]string, error) {
	if len(clusters) == 0 {
		clusters = o.members
	}
	for _, c := range clusters {
		if !slices.Contains(o.members, c) {
			return nil, fmt.Errorf("%s: %s is not a member (members: %s)", flag, c, strings.Join(o.members, ", "))
		}
	}
	if len(clusters) == 0 {
		return nil, fmt.Errorf("%s: no members (none on the hub in --controller-namespace %s, and no --members)", flag, o.controllerNamespace)
	}
	return slices.Sorted(slices.Values(clusters)), nil
}

// verify runs the whole test: leftovers removed, deploy, observe, probe,
// fail over; and the cleanup, with its own timeout, however the rest
// ended (ctx cancelled by Ctrl-C included). progress hears each phase.
func (r *verifyRun) verify(ctx context.Context, cleanupTimeout time.Duration, progress io.Writer) *Verification {
	v := &Verification{Namespace: r.namespace, Providers: r.providers, Consumers: r.consumers}
	say := func(s string) { fmt.Fprintln(progress, "verify: "+s) }
	defer func() {
		say("cleaning up")
		err := r.cleanupWithin(context.WithoutCancel(ctx), cleanupTimeout)
		v.add(stepCheck("", "cleanup", "everything labelled "+verifyLabel+"="+verifyManager, "", err))
	}()
	say("removing what an earlier run left")
	if err := r.cleanupWithin(ctx, r.timeout); err != nil {
		v.add(stepCheck("", "leftovers of an earlier run removed", "", "", err))
		return v
	}
	say("deploying in " + r.namespace)
	if err := r.deploy(ctx); err != nil {
		v.add(stepCheck("", "deploy", r.namespace, "", err))
		return v
	}
	say("waiting for the pods and the imports")
	o, checks := r.observe(ctx)
	v.add(checks...)
	say("asking every name from each consumer")
	v.add(r.probeAll(ctx, o.plan(), "")...)
	say("failing over")
	v.add(r.failover(ctx, o)...)
	return v
}

func (o *verifyOptions) print(v *Verification) error {
	if o.output == "json" {
		return encode(o.streams.Out, o.output, v)
	}
	return v.table(o.streams.Out)
}

// table prints a row per check, then each failure with its problem and a
// summary.
func (v *Verification) table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tCHECK\tTARGET\tRESULT\tGOT")
	for _, c := range v.Checks {
		result := "ok"
		if !c.OK {
			result = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", orDash(c.Cluster), c.Check, orDash(c.Target), result, orDash(strings.Join(c.Got, ", ")))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if v.Failed == 0 {
		_, err := fmt.Fprintf(w, "\nAll %d checks passed.\n", len(v.Checks))
		return err
	}
	fmt.Fprintf(w, "\n%d of %d checks failed:\n", v.Failed, len(v.Checks))
	for _, c := range v.Checks {
		if c.OK {
			continue
		}
		fmt.Fprintf(w, "  %s: %s %s: %s\n", orDash(c.Cluster), c.Check, c.Target, c.Problem)
		if c.About != "" {
			fmt.Fprintf(w, "    expected: %s\n", c.About)
		}
	}
	return nil
}
