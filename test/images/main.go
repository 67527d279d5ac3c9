// Command images builds the OCI image archives of coredns-mcs and
// mcs-controller (make images; README.md, Images) without a Docker daemon
// and without pulling a base image: each archive holds an image index with
// an image for linux/amd64 and one for linux/arm64, each a base layer this
// program writes (CA certificates, /etc/passwd and /etc/group with the
// non-root user 65532) and a layer with the static binary compiled for its
// architecture. The same sources, version, revision and timestamp give the
// same digests on any building machine, and the same archive on any of the
// same architecture: the docker save side names that machine's image.
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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
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
	flag.StringVar(&o.pin, "pin", "", "a directory of kustomize overlays (deploy/overlays) whose images: to set to what was built, by digest; empty: none")
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

// run builds each program's image index into an archive in out, the
// binaries compiled in a temporary directory.
func run(ctx context.Context, o options, out string) error {
	tmp, err := os.MkdirTemp("", "images-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	pins := map[string]pinned{}
	for _, p := range programs {
		idx, err := imageIndex(ctx, root, tmp, p, o)
		if err != nil {
			return err
		}
		archive := filepath.Join(out, p.name+".oci.tar")
		digest, err := writeArchive(idx, o.ref(p), o.created, archive)
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		fmt.Printf("%s %s %s\n", archive, o.ref(p), digest)
		pins[p.name] = pinned{o.repo + "/" + p.name, digest.String()}
	}
	if o.pin == "" {
		return nil
	}
	return pinOverlays(o.pin, pins)
}

// imageIndex compiles p for each of arches and returns the index of its
// images, each under its platform, which is what a runtime picks by.
func imageIndex(ctx context.Context, root, tmp string, p program, o options) (v1.ImageIndex, error) {
	var adds []mutate.IndexAddendum
	for _, arch := range arches {
		bin := filepath.Join(tmp, p.name+"-"+arch)
		if err := compile(ctx, root, p, arch, o.version, bin); err != nil {
			return nil, err
		}
		img, err := image(p, o, arch, bin)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", p.name, arch, err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
	}
	return mutate.AppendManifests(empty.Index, adds...), nil
}
