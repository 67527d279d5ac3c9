// Command images builds the OCI image archives of coredns-mcs and
// mcs-controller (make images; README.md, Images) without a Docker daemon
// and without pulling a base image: each image is a base layer this program
// writes (CA certificates, /etc/passwd and /etc/group with the non-root user
// 65532) and a layer with the static binary. The same sources, version,
// revision and timestamp give the same bytes, so the same digests.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

func main() {
	var (
		o     options
		out   string
		epoch int64
	)
	flag.StringVar(&out, "out", "_output/images", "directory of the image archives, <name>.oci.tar each")
	flag.StringVar(&o.repo, "repo", "registry.example.com/coredns-mcs", "repository the images are named under: <repo>/<name>:<version>")
	flag.StringVar(&o.version, "version", "dev", "the programs' version (-version) and the images' tag")
	flag.StringVar(&o.revision, "revision", "", "the git commit the images are built from (label org.opencontainers.image.revision)")
	flag.StringVar(&o.source, "source", "https://github.com/coredns-mcs/coredns-mcs", "label org.opencontainers.image.source")
	flag.Int64Var(&epoch, "epoch", envEpoch(), "time of every file and of the images, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
	flag.Parse()
	o.created = time.Unix(epoch, 0).UTC()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, out); err != nil {
		fmt.Fprintln(os.Stderr, "images:", err)
		os.Exit(1)
	}
}

func envEpoch() int64 {
	n, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// run compiles both programs into a temporary directory and writes their
// archives into out.
func run(ctx context.Context, o options, out string) error {
	tmp, err := os.MkdirTemp("", "images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	root, arch, err := goEnv(ctx)
	if err != nil {
		return err
	}
	o.arch = arch
	for _, p := range programs {
		bin := filepath.Join(tmp, p.name)
		if err := compile(ctx, root, p, o.version, bin); err != nil {
			return err
		}
		img, err := image(p, o, bin)
		if err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		archive := filepath.Join(out, p.name+".oci.tar")
		digest, err := writeArchive(img, o.ref(p), o.created, archive)
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		fmt.Printf("%s %s %s\n", archive, o.ref(p), digest)
	}
	return nil
}
