package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
)

// addMemberContexts registers --member-context: cloud kubeconfigs name
// their contexts after ARNs or long generated names, never after the
// member's registered name, so status, diagnose and join take a mapping.
func (o *hubOptions) addMemberContexts(cmd *cobra.Command) {
	cmd.Flags().StringToStringVar(&o.memberContexts, "member-context", nil,
		"CLUSTER=CONTEXT: the kubeconfig context that reaches member CLUSTER, when it is not named CLUSTER (repeat, or comma-separate)")
}

// contextOf is the kubeconfig context of member cluster: its mapping, or
// its own name.
func (o *hubOptions) contextOf(cluster string) string {
	if c, ok := o.memberContexts[cluster]; ok && c != "" {
		return c
	}
	return cluster
}

// memberConfig reaches member cluster through its context, from the same
// kubeconfig as every other cluster.
func (o *hubOptions) memberConfig(cluster string) (*rest.Config, error) {
	kctx := o.contextOf(cluster)
	cfg, err := o.contextFlags(kctx).ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("no usable kubeconfig context %q for member %s: %w", kctx, cluster, err)
	}
	return cfg, nil
}

// contextFlags are kubectl's flags with kctx in place of --context: every
// other one (--kubeconfig, --as, --token, --request-timeout, ...) applies to
// every cluster a command reaches, the hub's and the members', as it would
// to each if kubectl were run against it.
func (o *hubOptions) contextFlags(kctx string) *genericclioptions.ConfigFlags {
	g, c := o.flags, genericclioptions.NewConfigFlags(false)
	c.CacheDir, c.KubeConfig, c.ClusterName, c.AuthInfoName = g.CacheDir, g.KubeConfig, g.ClusterName, g.AuthInfoName
	c.APIServer, c.TLSServerName, c.Insecure, c.CertFile, c.KeyFile, c.CAFile = g.APIServer, g.TLSServerName, g.Insecure, g.CertFile, g.KeyFile, g.CAFile
	c.BearerToken, c.Impersonate, c.ImpersonateUID, c.ImpersonateGroup, c.ImpersonateUserExtra = g.BearerToken, g.Impersonate, g.ImpersonateUID, g.ImpersonateGroup, g.ImpersonateUserExtra
	c.Username, c.Password, c.Timeout, c.DisableCompression, c.ProxyURL = g.Username, g.Password, g.Timeout, g.DisableCompression, g.ProxyURL
	c.Context = &kctx
	return c
}

// contextHint is how a fix names the member's context in a command.
func (o *hubOptions) contextHint(cluster string) string {
	return "--context " + o.contextOf(cluster)
}
