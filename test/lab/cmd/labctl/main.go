// Command labctl runs the local multi-cluster lab: four Kubernetes control
// planes (hub, member1, member2, member3) made of local processes on
// loopback, with kwok standing in for the kubelet of one fake node each.
//
//	labctl up      start the lab, or show it when it already runs
//	labctl down    stop every process of the lab
//	labctl status  show whether each component is alive
//	labctl watch   stop the lab once standard input closes (used by labtest)
//
// labctl expects the binaries it starts beside its own executable
// (_output/bin) and keeps the lab's state in ../lab (_output/lab).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

const usage = `usage: labctl up|down|status|watch

  up      start the clusters hub, member1, member2 and member3, or show them
          when they already run; kubeconfig in _output/lab/kubeconfig
  down    stop every process of the lab and check that no port is left bound
  status  show whether each component of the lab is alive
  watch   stop the lab once standard input reaches end of file: the test
          binary that started the lab holds the pipe's other end
`

func main() {
	if len(os.Args) != 2 || !slices.Contains([]string{"up", "down", "status", "watch"}, os.Args[1]) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// An interrupted start-up stops what it has started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "labctl %s: %v\n", os.Args[1], err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, command string) error {
	l, err := newLab()
	if err != nil {
		return err
	}
	switch command {
	case "up":
		return l.up(ctx)
	case "down":
		return l.down()
	case "status":
		return l.status(os.Stdout)
	default:
		return l.watch(os.Stdin)
	}
}
