package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
	"github.com/coredns-mcs/coredns-mcs/deploy/member"
)

// fieldManager owns what kubectl mcs applies (server-side apply).
const fieldManager = "kubectl-mcs"

// The member account, the controller's identity in every member
// (deploy/member).
const (
	memberNamespace = credentials.Namespace
	serviceAccount  = credentials.ServiceAccount
)

// hubOptions are the flags the subcommands share. -n (kubectl's
// --namespace) is the service's namespace wherever it means anything
// (status, diagnose); the controller's namespace on the hub is always
// --controller-namespace.
type hubOptions struct {
	flags               *genericclioptions.ConfigFlags
	streams             genericiooptions.IOStreams
	hubContext          string
	controllerNamespace string
	memberContexts      map[string]string // --member-context, by cluster
}

func (o *hubOptions) addFlags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.hubContext, "hub-context", "", "kubeconfig context of the hub, where mcs-controller runs (default: the current context)")
	cmd.Flags().StringVar(&o.controllerNamespace, "controller-namespace", memberNamespace, "the controller's namespace on the hub, where the member Secrets are")
}

// noNamespace refuses -n in a subcommand that has no service: -n was the
// controller's namespace there once, and silently ignoring it would write
// the member Secret where the user did not mean.
func noNamespace(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed {
		return fmt.Errorf("-n is the service's namespace in every kubectl mcs command, and %s has no service: give the controller's namespace on the hub as --controller-namespace", cmd.Name())
	}
	return nil
}

// writeOptions are those of the subcommands that write.
type writeOptions struct {
	hubOptions
	verb   string // join or unjoin, as errors name it
	dryRun string
	// hubAsMember lets the member context reach the hub's API server.
	hubAsMember bool
}

func (o *writeOptions) addFlags(cmd *cobra.Command) {
	o.hubOptions.addFlags(cmd)
	cmd.Flags().StringVar(&o.dryRun, "dry-run", "none", `"server": the API servers check every write and keep none, as kubectl's --dry-run=server`)
	cmd.Flags().BoolVar(&o.hubAsMember, "hub-as-member", false, "the member is the hub itself (its context reaches the hub's API server), on purpose; refused without it")
}

// dryRunAll is the writes' dryRun option: nil, or All with --dry-run=server.
func (o *writeOptions) dryRunAll() ([]string, error) {
	switch o.dryRun {
	case "none", "":
		return nil, nil
	case "server":
		return []string{metav1.DryRunAll}, nil
	}
	return nil, fmt.Errorf("--dry-run=%s: none or server", o.dryRun)
}

// hubConfig reaches the hub, from the same kubeconfig.
func (o *hubOptions) hubConfig() (*rest.Config, error) {
	cfg, err := o.contextFlags(o.hubContext).ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("the hub (--hub-context %q): %w", o.hubContext, err)
	}
	return cfg, nil
}

// hub is a client of the hub.
func (o *hubOptions) hub() (kubernetes.Interface, error) {
	cfg, err := o.hubConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

type joinOptions struct {
	writeOptions
	duration time.Duration
	server   string
	// exportNamespaces, when set, bounds the namespaces the member may
	// export from (the Secret's annotation); nil keeps the Secret's.
	exportNamespaces *string
	// createNamespaces, when set, grants (or takes back) the member
	// account's leave to create namespaces; nil keeps what the member has.
	createNamespaces *bool
}

func newJoin(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &joinOptions{writeOptions: writeOptions{hubOptions: hubOptions{flags: flags, streams: streams}, verb: "join"}}
	cmd := &cobra.Command{
		Use:   "join CLUSTER --context MEMBER|--member-context CLUSTER=MEMBER [--hub-context HUB] [--controller-namespace NAMESPACE]",
		Short: "Register a member cluster with mcs-controller, or renew its token",
		Long: `join makes member cluster CLUSTER known to mcs-controller:
  - in the member (--context, or --member-context CLUSTER=CONTEXT; never the current context, and
    never a context that reaches the hub's API server unless --hub-as-member says so): namespace
    mcs-system, the member account (the ServiceAccount mcs-member, not the hub controller's
    mcs-controller), its RBAC and the admission policy that bounds what it may write, exactly
    deploy/member's manifests; with --create-namespaces, its leave to create the namespaces of
    the services it imports (mcs-controller --create-namespaces uses it), which
    --create-namespaces=false takes back;
  - a token of that ServiceAccount, bounded in time (--duration; the API server may cap it);
  - on the hub (--hub-context), in the controller's namespace (--controller-namespace, default
    mcs-system): the Secret
    CLUSTER, labelled mcs.coredns-mcs.io/cluster=CLUSTER, holding a kubeconfig with that token, and
    annotated mcs.coredns-mcs.io/credential-expires with when it expires.
  - then, once the Secret holds the new token, the account join made before the member account had
    a name of its own (mcs-system/mcs-controller in the member, its RBAC and admission policy): it
    deletes them, which revokes that account's tokens; on the hub itself the ServiceAccount stays,
    as it is the controller's.
mcs-controller renews the token before it expires and writes the new one into the Secret. Run join
again to rotate it at once (after deleting the ServiceAccount to revoke a leaked token, say): the
controller takes the new Secret up without a restart.`,
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
	cmd.Flags().DurationVar(&o.duration, "duration", 30*24*time.Hour, "how long the token is valid")
	cmd.Flags().Func("export-namespaces", "NAMESPACE[,NAMESPACE...]: the only namespaces the member may export from (the Secret's annotation "+api.AnnotationExportNamespaces+"; \"\" for none); without it, a bound the Secret has is kept", func(v string) error {
		if _, err := api.ParseNamespaces(v); err != nil {
			return err
		}
		o.exportNamespaces = &v
		return nil
	})
	cmd.Flags().Func("create-namespaces", "true: let the controller create the namespaces of the services it imports into the member (with mcs-controller --create-namespaces); false: take that back; without it, what the member has is kept", func(v string) error {
		b, err := strconv.ParseBool(v)
		o.createNamespaces = &b
		return err
	})
	cmd.Flags().Lookup("create-namespaces").NoOptDefVal = "true"
	cmd.Flags().StringVar(&o.server, "member-server", "", "the member's API server address as the hub's pods reach it (default: the --context's server)")
	return cmd
}

func (o *joinOptions) run(ctx context.Context, cluster string) error {
	if err := o.member(cluster); err != nil {
		return err
	}
	if err := o.validate(cluster); err != nil {
		return err
	}
	dryRun, err := o.dryRunAll()
	if err != nil {
		return err
	}
	hub, m, isHub, err := o.clusters(ctx)
	if err != nil {
		return err
	}
	for _, doc := range [][]byte{member.Namespace, member.ControllerRBAC, member.ControllerAdmission} {
		if err := m.each(doc, m.apply(ctx, dryRun)); err != nil {
			return fmt.Errorf("the member: %w", err)
		}
	}
	if err := o.grantNamespaces(ctx, m, dryRun); err != nil {
		return fmt.Errorf("the member: %w", err)
	}
	token, err := o.token(ctx, m, dryRun)
	if err != nil {
		return err
	}
	kubeconfig, err := o.kubeconfig(cluster, token.Status.Token)
	if err != nil {
		return err
	}
	if err := o.saveSecret(ctx, hub, cluster, kubeconfig, token.Status.ExpirationTimestamp, dryRun); err != nil {
		return err
	}
	keep := func(*unstructured.Unstructured) bool { return false }
	if isHub {
		keep = legacyAccount
	}
	moved, err := m.deleteEach(ctx, []byte(legacyAccess), dryRun, keep)
	if err != nil {
		return fmt.Errorf("the member: the old account's access: %w (the Secret holds the new token already; run join again)", err)
	}
	if moved > 0 {
		fmt.Fprintf(o.streams.Out, "%s: the old account %s/mcs-controller's access deleted there (%d objects); the controller now reaches it as %s/%s\n", cluster, memberNamespace, moved, memberNamespace, serviceAccount)
	}
	if dryRun != nil {
		fmt.Fprintf(o.streams.Out, "%s would join: the member and the hub accept every write (dry run)\n", cluster)
		return nil
	}
	fmt.Fprintf(o.streams.Out, "%s joined: Secret %s/%s on the hub; its token expires %s (mcs-controller renews it before then)\n",
		cluster, o.controllerNamespace, cluster, token.Status.ExpirationTimestamp.UTC().Format(time.RFC3339))
	return nil
}

// grantNamespaces applies, or with --create-namespaces=false deletes, the
// member account's leave to create namespaces; without the flag, what the
// member has stays.
func (o *joinOptions) grantNamespaces(ctx context.Context, m *memberClients, dryRun []string) error {
	switch {
	case o.createNamespaces == nil:
		return nil
	case *o.createNamespaces:
		return m.each(member.ControllerNamespaces, m.apply(ctx, dryRun))
	}
	_, err := m.deleteEach(ctx, member.ControllerNamespaces, dryRun, nil)
	return err
}

// token is a token of the member account; none in a dry run,
// where the account may not exist.
func (o *joinOptions) token(ctx context.Context, m *memberClients, dryRun []string) (*authenticationv1.TokenRequest, error) {
	if dryRun != nil {
		return &authenticationv1.TokenRequest{}, nil
	}
	token, err := m.kube.CoreV1().ServiceAccounts(memberNamespace).CreateToken(ctx, serviceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(o.duration.Seconds()))},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("the member: a token of %s/%s: %w", memberNamespace, serviceAccount, err)
	}
	return token, nil
}

// member names the member's kubeconfig context: --context, or
// --member-context's mapping of cluster (so that one set of flags reaches
// the same member in join, unjoin, status and diagnose). There is no
// default: the current context is often the hub's, and what join and
// unjoin write into a member must never land there.
func (o *writeOptions) member(cluster string) error {
	mapped, ok := o.memberContexts[cluster]
	given := ptr.Deref(o.flags.Context, "")
	switch {
	case ok && given != "" && given != mapped:
		return fmt.Errorf("--context %s and --member-context %s=%s name two contexts for the member", given, cluster, mapped)
	case ok:
		o.flags.Context = &mapped
	case given == "":
		return fmt.Errorf("--context (or --member-context %s=CONTEXT) names the member's kubeconfig context: kubectl mcs %s writes into the member, and the current context may be the hub", cluster, o.verb)
	}
	return nil
}

func (o *joinOptions) validate(cluster string) error {
	if o.duration < 10*time.Minute {
		return fmt.Errorf("--duration %s: at least 10m (the API server refuses shorter tokens)", o.duration)
	}
	return validClusterName(cluster)
}

// kubeconfig is the member's kubeconfig for the controller: the --context's
// server (or --member-server) and CA, and the token.
func (o *joinOptions) kubeconfig(cluster, token string) ([]byte, error) {
	raw, err := o.flags.ToRawKubeConfigLoader().RawConfig()
	if err != nil {
		return nil, err
	}
	kctx := raw.Contexts[*o.flags.Context]
	if kctx == nil || raw.Clusters[kctx.Cluster] == nil {
		return nil, fmt.Errorf("context %q has no cluster in the kubeconfig", *o.flags.Context)
	}
	c := raw.Clusters[kctx.Cluster]
	if c.InsecureSkipTLSVerify {
		return nil, fmt.Errorf("context %q skips verifying its server's certificate: the controller refuses such a member unless it runs with --allow-insecure-member-tls; give the kubeconfig the server's CA", *o.flags.Context)
	}
	ca := c.CertificateAuthorityData
	if len(ca) == 0 && c.CertificateAuthority != "" {
		if ca, err = os.ReadFile(c.CertificateAuthority); err != nil {
			return nil, fmt.Errorf("context %q's certificate authority: %w", *o.flags.Context, err)
		}
	}
	server := o.serverOf(c)
	if u, err := url.Parse(server); err != nil || u.Scheme != "https" {
		return nil, fmt.Errorf("the member's server %q is not https://host:port: the controller refuses such a member unless it runs with --allow-insecure-member-tls; give --member-server https://host:port", server)
	}
	out := clientcmdapi.NewConfig()
	out.Clusters[cluster] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	out.AuthInfos[serviceAccount] = &clientcmdapi.AuthInfo{Token: token}
	out.Contexts[cluster] = &clientcmdapi.Context{Cluster: cluster, AuthInfo: serviceAccount}
	out.CurrentContext = cluster
	return clientcmd.Write(*out)
}

func (o *joinOptions) serverOf(c *clientcmdapi.Cluster) string {
	if o.server != "" {
		return o.server
	}
	return c.Server
}

// saveSecret creates or replaces the member Secret on the hub, with the
// export bound --export-namespaces sets, else the one it has: a rotation
// never widens what the member may export. The annotation of when the token
// expires is what the member answered (none in a dry run).
func (o *joinOptions) saveSecret(ctx context.Context, hub kubernetes.Interface, cluster string, kubeconfig []byte, expires metav1.Time, dryRun []string) error {
	secret := &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: cluster, Namespace: o.controllerNamespace,
			Labels: map[string]string{api.LabelCluster: cluster},
		},
		Data: map[string][]byte{api.KeyKubeconfig: kubeconfig},
	}
	bound := o.exportNamespaces
	if bound == nil {
		have, err := hub.CoreV1().Secrets(secret.Namespace).Get(ctx, cluster, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("the hub: Secret %s/%s: %w", secret.Namespace, cluster, err)
		default:
			if v, ok := have.Annotations[api.AnnotationExportNamespaces]; ok {
				bound = &v
			}
		}
	}
	secret.Annotations = map[string]string{}
	if bound != nil {
		secret.Annotations[api.AnnotationExportNamespaces] = *bound
	}
	if !expires.IsZero() {
		secret.Annotations[api.AnnotationCredentialExpires] = expires.UTC().Format(time.RFC3339)
	}
	body, err := json.Marshal(secret)
	if err != nil {
		return err
	}
	_, err = hub.CoreV1().Secrets(secret.Namespace).Patch(ctx, cluster, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true), DryRun: dryRun})
	if err != nil {
		return fmt.Errorf("the hub: Secret %s/%s: %w", secret.Namespace, cluster, err)
	}
	return nil
}

// decode splits a multi-document manifest into objects.
func decode(doc []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}
