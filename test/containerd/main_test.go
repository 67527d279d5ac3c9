//go:build lab

// Package containerd runs the two images of make images under a real
// container runtime, containerd and runc from Debian's packages, as deploy/
// runs them: each in a network namespace of its own, as the user, with the
// capabilities, root filesystem, seccomp profile, memory limit, arguments,
// environment and mounts that deploy/'s rendered manifests give it.
// coredns-mcs serves member2 with the overlay's Corefile and answers a real
// DNS client; mcs-controller syncs the lab's hub and members, and a service
// exported in member1 is answered in member2.
//
// It needs root, and containerd, containerd-shim-runc-v2, ctr and runc in
// PATH (.ci/run installs them); without them it skips and says why. Run it
// with the lab's other tests: go test -race -tags lab -p 1 ./...
package containerd

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// skip says why this machine cannot run the images, if it cannot.
var skip string

func TestMain(m *testing.M) {
	if skip = missing(); skip != "" {
		os.Exit(m.Run()) // the test skips: no lab is started for it
	}
	labtest.Main(m)
}

// missing names what the machine lacks to run containers, if anything.
func missing() string {
	if os.Geteuid() != 0 {
		return "containerd and runc need root (make test runs as root in CI)"
	}
	for _, bin := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Sprintf("no %s in PATH: install Debian's containerd and runc packages (.ci/run does)", bin)
		}
	}
	return ""
}
