// Command kubectl-mcs is the kubectl plugin of coredns-mcs (kubectl mcs):
// join registers a member cluster with mcs-controller in one command, and
// unjoin takes it back; status shows what every member holds of a
// multi-cluster service, and diagnose checks what it needs. It reads kubeconfigs as kubectl does
// (--kubeconfig, --context, -n).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// version is set at link time (-ldflags -X main.version=…).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRoot(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		stop()
		os.Exit(1)
	}
}

// newRoot is kubectl mcs with its subcommands. The kubeconfig flags are
// kubectl's: --context names the member, -n the controller's namespace on
// the hub.
func newRoot(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "mcs",
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl mcs"},
		Short:         "Operate coredns-mcs's multi-cluster services",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	flags.AddFlags(root.PersistentFlags())
	root.AddCommand(newJoin(flags, streams), newUnjoin(flags, streams), newStatus(flags, streams), newDiagnose(flags, streams))
	return root
}
