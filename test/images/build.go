package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// program is one of the two images.
type program struct {
	name  string   // of the image, and of the archive
	pkg   string   // the main package, relative to the module's root
	path  string   // of the binary in the image, its entrypoint
	ports []string // ExposedPorts
	// bindLow gives the binary the file capability cap_net_bind_service,
	// as the stock CoreDNS image does, so that user 65532 can serve port 53
	// where the runtime does not allow unprivileged low ports.
	bindLow bool
}

var programs = []program{
	// /coredns, as in the stock CoreDNS image, so that coredns-mcs replaces
	// it in a Deployment that names the command.
	{name: "coredns-mcs", pkg: "./cmd/coredns-mcs", path: "coredns", ports: []string{"53/udp", "53/tcp", "9153/tcp"}, bindLow: true},
	{name: "mcs-controller", pkg: "./cmd/mcs-controller", path: "mcs-controller", ports: []string{"8080/tcp"}},
}

// arches are the architectures every image is built for, on linux: Go
// cross-compiles a program without cgo, so neither needs emulation.
var arches = []string{"amd64", "arm64"}

// compile builds p's static binary for linux/arch into out, stamped with
// version: no cgo, no paths of this machine (-trimpath), no build ID, no
// VCS stamp and no symbol table, so that the same sources and toolchain
// give the same bytes on any building machine.
func compile(ctx context.Context, root string, p program, arch, version, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version="+version, "-o", out, p.pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("GOARCH=%s go build %s: %w\n%s", arch, p.pkg, err, b)
	}
	return nil
}

// moduleRoot is the directory of this repository's go.mod, wherever the
// builder runs from (make images from the root, its test from test/images).
func moduleRoot(ctx context.Context) (string, error) {
	b, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env: %w", err)
	}
	gomod := strings.TrimSpace(string(b))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("not inside the coredns-mcs module (go env GOMOD is %q)", gomod)
	}
	return filepath.Dir(gomod), nil
}
