// Command kubectl-mcs is the kubectl plugin of coredns-mcs (kubectl mcs):
// join registers a member cluster with mcs-controller in one command, and
// unjoin takes it back; status shows what every member holds of a
// multi-cluster service, diagnose checks what it needs, gather writes a
// support bundle, and verify tests the live fleet with pods of its own. It
// reads kubeconfigs as kubectl does (--kubeconfig, --context); -n is the
// service's namespace in every subcommand that has a service, and the
// namespace verify works in.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// version is set at link time (-ldflags -X main.version=…), make build and
// make images to $(VERSION) (Makefile).
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRoot(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}).ExecuteContext(ctx)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is the process's status for err, said on w: 0 for none, 1 for
// diagnose's failed checks (already printed) and for other commands'
// errors, and the code an *exitError carries (diagnose could not run: 2).
func exitCode(err error, w io.Writer) int {
	var e *exitError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errChecksFailed):
		return 1
	case errors.As(err, &e):
		fmt.Fprintln(w, "error:", e.err)
		return e.code
	}
	fmt.Fprintln(w, "error:", err)
	return 1
}

// exitError is an error with the exit status it calls for.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// newRoot is kubectl mcs with its subcommands. The kubeconfig flags are
// kubectl's: --context names the member in join and unjoin, -n the
// service's namespace in status and diagnose (join and unjoin refuse it);
// every other one reaches every cluster a command does, the hub's too.
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
	root.AddCommand(newJoin(flags, streams), newUnjoin(flags, streams), newStatus(flags, streams), newDiagnose(flags, streams), newGather(flags, streams), newVerify(flags, streams))
	return root
}
