package main

import (
	"archive/tar"
	"bytes"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// options are what the images are stamped with besides the binaries.
type options struct {
	repo, version, revision, source string
	created                         time.Time // of every file, history entry and the image
	pin                             string    // overlays to pin the images in (pin.go)
}

func (o options) ref(p program) string { return o.repo + "/" + p.name + ":" + o.version }

// nonroot is the user and group the programs run as, as in distroless's
// nonroot images.
const (
	nonroot     = 65532
	nonrootName = "nonroot"
	home        = "/home/nonroot"
)

// image is p's image for linux/arch: the base layer, then a layer with
// bin, compiled for arch, at /<p.path>, run as nonroot.
func image(p program, o options, arch, bin string) (v1.Image, error) {
	base, err := baseLayer(o.created)
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	binary, err := binaryLayer(p, o.created, bin)
	if err != nil {
		return nil, fmt.Errorf("binary layer: %w", err)
	}
	img, err := mutate.ConfigFile(mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1), config(p, o, arch))
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.created}
	return mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: created,
			CreatedBy: "test/images: CA certificates, /etc/passwd, /etc/group, /etc/nsswitch.conf, " + home + ", /tmp"}},
		mutate.Addendum{Layer: binary, MediaType: types.OCILayer, History: v1.History{Created: created,
			CreatedBy: "test/images: GOARCH=" + arch + " go build -trimpath " + p.pkg + " -> /" + p.path}},
	)
}

func config(p program, o options, arch string) *v1.ConfigFile {
	ports := map[string]struct{}{}
	for _, port := range p.ports {
		ports[port] = struct{}{}
	}
	return &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: o.created},
		Config: v1.Config{
			Entrypoint:   []string{"/" + p.path},
			User:         fmt.Sprintf("%d:%d", nonroot, nonroot),
			WorkingDir:   "/",
			ExposedPorts: ports,
			Labels: map[string]string{
				"org.opencontainers.image.title":    p.name,
				"org.opencontainers.image.source":   o.source,
				"org.opencontainers.image.version":  o.version,
				"org.opencontainers.image.revision": o.revision,
				"org.opencontainers.image.created":  o.created.Format(time.RFC3339),
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
}

// baseLayer is what a static Go program needs from a root filesystem.
func baseLayer(created time.Time) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%[1]s:x:%[2]d:%[2]d:%[1]s:%[3]s:/sbin/nologin\n", nonrootName, nonroot, home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", nonrootName, nonroot)
	return layer(created, []entry{
		dir("etc/"),
		file("etc/group", []byte(group), 0o644),
		// Go's resolver reads it to order /etc/hosts before DNS.
		file("etc/nsswitch.conf", []byte("hosts: files dns\n"), 0o644),
		file("etc/passwd", []byte(passwd), 0o644),
		dir("etc/ssl/"),
		dir("etc/ssl/certs/"),
		file("etc/ssl/certs/ca-certificates.crt", caBundle(), 0o644),
		dir("home/"),
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "home/nonroot/", Mode: 0o700, Uid: nonroot, Gid: nonroot}},
		{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}},
	})
}

// caBundle is Mozilla's roots as Go's golang.org/x/crypto/x509roots/fallback
// ships them, pinned by go.sum, so that the image does not depend on the
// building machine's ca-certificates. Roots that NSS distrusts after a date
// are left out: a PEM file cannot carry that constraint.
func caBundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint == nil {
			_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		}
	}
	return b.Bytes()
}

// binaryLayer holds the binary at /<p.path>.
func binaryLayer(p program, created time.Time, bin string) (v1.Layer, error) {
	b, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	e := file(p.path, b, 0o755)
	if p.bindLow {
		e.hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": netBindServiceCap}
	}
	return layer(created, []entry{e})
}

// netBindServiceCap is the security.capability extended attribute that
// setcap cap_net_bind_service=+ep writes (struct vfs_cap_data, revision 2):
// the effective flag, then permitted bit 10 (CAP_NET_BIND_SERVICE).
const netBindServiceCap = "\x01\x00\x00\x02" + "\x00\x04\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00" + "\x00\x00\x00\x00"

// entry is a file or directory of a layer.
type entry struct {
	hdr  tar.Header
	body []byte
}

func dir(name string) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
}

func file(name string, body []byte, mode int64) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}, body: body}
}

// layer is a gzipped OCI layer of entries, in their order, every one at
// time created.
func layer(created time.Time, entries []entry) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		hdr := e.hdr
		hdr.ModTime = created
		if err := tw.WriteHeader(&hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}
