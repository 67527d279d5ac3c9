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
	c := genericclioptions.NewConfigFlags(false)
	kctx := o.contextOf(cluster)
	c.KubeConfig, c.Context = o.flags.KubeConfig, &kctx
	cfg, err := c.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("no usable kubeconfig context %q for member %s: %w", kctx, cluster, err)
	}
	return cfg, nil
}

// contextHint is how a fix names the member's context in a command.
func (o *hubOptions) contextHint(cluster string) string {
	return "--context " + o.contextOf(cluster)
}
