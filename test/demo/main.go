// Command demo is make demo: on the local lab (make lab-up) it starts
// mcs-controller on the hub and a coredns-mcs per member, then plays the
// story of serve in namespace demo, step by step, showing each command it
// runs and that command's real output. The controller and the
// coredns-mcs processes stay running afterwards, until make lab-down.
//
//	go run ./test/demo [-root DIR]
//
// It needs bin/ (make build), the lab running with its network and
// _output/bin/kubectl (make lab-up as root, with ip and nft), and dig: the
// requests of steps 5 to 7 go from member2's node through its kube-proxy. Running it again replaces the
// previous run's processes and brings the objects back to the start of the
// story.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	root := flag.String("root", ".", "the repository's top directory: bin/, _output/ and the manifests")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := newStory(*root, os.Stdout)
	if err == nil {
		_, err = s.play(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "\nmake demo FAILED: %v\n(logs of mcs-controller and coredns-mcs: _output/demo/logs; of the lab: _output/lab/logs)\n", err)
		os.Exit(1)
	}
}
