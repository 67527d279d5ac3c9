// Command labctl runs the local multi-cluster lab: four Kubernetes control
// planes (hub, member1, member2, member3) made of local processes on
// loopback, with kwok standing in for the kubelet of one fake node each.
//
//	labctl up      start the lab, or show it when it already runs
//	labctl down    stop every process of the lab
//	labctl status  show whether each component is alive
//	labctl watch   stop the lab once standard input closes (used by labtest)
//	labctl stop|start|hold CLUSTER COMPONENT
//	               stop one component, start it again, or both (used by labtest)
//	labctl node-proxy CLUSTER
//	               the kube-proxy component, run by labctl up (nodeproxy.go)
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
	"strings"
	"syscall"
)

const usage = `usage: labctl up|down|status|watch
       labctl stop|start|hold CLUSTER COMPONENT

  up      start the clusters hub, member1, member2 and member3, or show them
          when they already run; kubeconfig in _output/lab/kubeconfig.
          The API servers log every write in
          _output/lab/logs/<cluster>-audit.log, unless LAB_AUDIT=0 is in
          its environment (README.md, Audit logs)
  down    stop every process of the lab and check that no port is left bound
  status  show whether each component of the lab is alive
  watch   stop the lab once standard input reaches end of file: the test
          binary that started the lab holds the pipe's other end
  stop    stop one component of a cluster, e.g. member1 kube-apiserver
          (SIGTERM, SIGKILL after 2s); the lab counts as running, with that
          component stopped
  start   start a component that is not running again, with the same
          arguments and data, and wait until it is ready; an apiserver's
          controller manager and scheduler are restarted with it
  hold    stop, then start again once standard input reaches end of file:
          a test stops a component this way, and it comes back however the
          test ends

Components run as labctl node-proxy CLUSTER (kube-proxy in the node's
network), labctl kubelet CLUSTER (runs pods of the images it has stand-ins
for, serves exec) and labctl pod-init DIR CONTAINER -- ARGV (a container's
init, which the kubelet starts).
`

func main() {
	args := os.Args[1:]
	if !valid(args) {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	// An interrupted start-up stops what it has started.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, args); err != nil {
		fmt.Fprintf(os.Stderr, "labctl %s: %v\n", strings.Join(args, " "), err)
		stop()
		os.Exit(1)
	}
}

func valid(args []string) bool {
	switch len(args) {
	case 1:
		return slices.Contains([]string{"up", "down", "status", "watch"}, args[0])
	case 2:
		return args[0] == "node-proxy" || args[0] == "kubelet"
	}
	if len(args) >= 5 && args[0] == "pod-init" && args[3] == "--" {
		return true
	}
	switch len(args) {
	case 3:
		return slices.Contains([]string{"stop", "start", "hold"}, args[0])
	}
	return false
}

func run(ctx context.Context, args []string) error {
	l, err := newLab()
	if err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return l.up(ctx)
	case "down":
		return l.down()
	case "status":
		return l.status(os.Stdout)
	case "watch":
		return l.watch(os.Stdin)
	}
	switch args[0] {
	case "node-proxy":
		return l.nodeProxy(ctx, args[1])
	case "kubelet":
		return l.kubelet(ctx, args[1])
	case "pod-init":
		return podInit(args[1], args[2], args[4:])
	}
	c, comp, err := l.lookup(args[1], args[2])
	if err != nil {
		return err
	}
	switch args[0] {
	case "stop":
		return l.stopOne(c, comp)
	case "start":
		return l.startOne(ctx, c, comp)
	default:
		return l.hold(ctx, c, comp, os.Stdin)
	}
}

// lookup finds the cluster and component of those names.
func (l *lab) lookup(clusterName, compName string) (cluster, *component, error) {
	components := l.components()
	i := slices.IndexFunc(clusters, func(c cluster) bool { return c.name == clusterName })
	j := slices.IndexFunc(components, func(c *component) bool { return c.name == compName })
	if i < 0 || j < 0 {
		var cs, comps []string
		for _, c := range clusters {
			cs = append(cs, c.name)
		}
		for _, c := range components {
			comps = append(comps, c.name)
		}
		return cluster{}, nil, fmt.Errorf("no component %s %s: clusters are %s, components %s",
			clusterName, compName, strings.Join(cs, ", "), strings.Join(comps, ", "))
	}
	return clusters[i], components[j], nil
}
