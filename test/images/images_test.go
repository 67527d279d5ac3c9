// Not under the lab tag: make test runs it once, with the unit tests, and
// its builds of both programs need no lab.
//go:build !lab

package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"debug/elf"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// TestImages runs the builder as make images does, twice, each time
// compiling both programs anew into a directory of its own: the archives
// must be the same bytes, so the same digests. It reads each archive back
// as an OCI layout, an index with an image per platform, and as a docker
// save archive, checks what a user of each image relies on, and runs the
// binary taken out of this machine's image with -version. The builder runs
// as a command, not in this -race binary, where compressing the layers
// would take minutes.
func TestImages(t *testing.T) {
	ctx := t.Context()
	o := options{
		repo: "registry.test/mcs", version: "v0.0.0-test", revision: "0123456789abcdef0123456789abcdef01234567",
		source: "https://example.test/coredns-mcs", created: time.Unix(1_700_000_000, 0).UTC(),
	}
	dir := t.TempDir()
	builder := filepath.Join(dir, "images")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", builder, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	first, second := filepath.Join(dir, "first"), filepath.Join(dir, "second")
	digests := runBuilder(t, builder, first, o)
	runBuilder(t, builder, second, o)
	for _, p := range programs {
		t.Run(p.name, func(t *testing.T) {
			archive := filepath.Join(first, p.name+".oci.tar")
			if a, b := fileSum(t, archive), fileSum(t, filepath.Join(second, p.name+".oci.tar")); a != b {
				t.Errorf("archive of the second build has sha256 %x, first %x", b, a)
			}
			checkArchive(t, archive, o.created)
			images := checkLayout(t, archive, o.ref(p), digests[archive])
			checkDockerArchive(t, archive, o.ref(p), images[dockerArch()])
			for _, arch := range slices.Sorted(maps.Keys(images)) {
				img := images[arch]
				t.Run(arch, func(t *testing.T) {
					checkConfig(t, img, p, o, arch)
					files := checkFiles(t, img, p)
					checkELF(t, files[p.path], arch)
					if arch == runtime.GOARCH {
						checkVersion(ctx, t, files[p.path], t.TempDir(), o.version)
					}
				})
			}
		})
	}
}

// runBuilder runs the builder into out and returns the digest it printed
// for each archive.
func runBuilder(t *testing.T, builder, out string, o options) map[string]string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), builder, "-out", out, "-repo", o.repo, "-version", o.version,
		"-revision", o.revision, "-source", o.source, "-epoch", strconv.FormatInt(o.created.Unix(), 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
	}
	digests := map[string]string{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("the builder printed %q, want: archive reference digest", line)
		}
		digests[f[0]] = f[2]
	}
	return digests
}

// checkArchive checks the tar itself: sorted entries owned by root at the
// image's time, and nothing left of the temporary layout.
func checkArchive(t *testing.T, archive string, created time.Time) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var names []string
	entries(t, f, func(h *tar.Header, _ io.Reader) {
		names = append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: uid %d gid %d time %s, want 0 0 %s", h.Name, h.Uid, h.Gid, h.ModTime, created)
		}
	})
	if !slices.IsSorted(names) {
		t.Errorf("entries not sorted: %q", names)
	}
	for _, want := range []string{"oci-layout", "index.json", "manifest.json"} {
		if !slices.Contains(names, want) {
			t.Errorf("no %s in %q", want, names)
		}
	}
}

// platforms are what a user of the images expects to run them on.
var platforms = []string{"linux/amd64", "linux/arm64"}

// checkLayout reads the archive as an OCI image layout, as ctr images
// import, skopeo oci-archive: and crane push of the extracted directory
// do: index.json names one image index, by the reference and the digest
// the builder printed, and the index an image per platform. The digests
// and sizes of the index, manifests and configs are validated here, the
// layers' as checkFiles unpacks them. It returns the images by
// architecture.
func checkLayout(t *testing.T, archive, ref, digest string) map[string]v1.Image {
	t.Helper()
	dir := t.TempDir()
	untar(t, archive, dir)
	l, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	top, err := l.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json has %d manifests, want 1", len(m.Manifests))
	}
	d := m.Manifests[0]
	tag := ref[strings.LastIndex(ref, ":")+1:]
	if got := d.Annotations["io.containerd.image.name"]; got != ref {
		t.Errorf("io.containerd.image.name %q, want %q", got, ref)
	}
	if got := d.Annotations["org.opencontainers.image.ref.name"]; got != tag {
		t.Errorf("org.opencontainers.image.ref.name %q, want %q", got, tag)
	}
	if d.MediaType != types.OCIImageIndex || d.Digest.String() != digest {
		t.Errorf("index.json names a %s %s, want the %s the builder printed, %s", d.MediaType, d.Digest, types.OCIImageIndex, digest)
	}
	idx, err := top.ImageIndex(d.Digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Index(idx, validate.Fast); err != nil {
		t.Fatalf("OCI layout: %v", err)
	}
	return platformImages(t, idx)
}

// platformImages checks the index holds one image manifest per platform
// and returns the images by architecture.
func platformImages(t *testing.T, idx v1.ImageIndex) map[string]v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]v1.Image{}
	var got []string
	for _, d := range m.Manifests {
		if d.Platform == nil || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("index: %s %s for platform %v, want an OCI image manifest for a platform", d.MediaType, d.Digest, d.Platform)
			continue
		}
		got = append(got, d.Platform.String())
		if images[d.Platform.Architecture], err = idx.Image(d.Digest); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, platforms) {
		t.Fatalf("index: images for %q, want %q", got, platforms)
	}
	return images
}

// checkDockerArchive reads the archive as docker load and crane push of the
// tar do (manifest.json): it holds want, the image of this machine's
// platform, so that docker load here gets an image that runs here.
func checkDockerArchive(t *testing.T, archive, ref string, want v1.Image) {
	t.Helper()
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Layer bytes were validated through the OCI layout: the same files.
	if err := validate.Image(img, validate.Fast); err != nil {
		t.Fatalf("docker archive: %v", err)
	}
	m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(archive) })
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{ref}) {
		t.Errorf("manifest.json %+v, want one image tagged %s", m, ref)
	}
	if a, b := blobs(t, img), blobs(t, want); !slices.Equal(a, b) {
		t.Errorf("manifest.json names config and layers %s, want linux/%s's %s", a, dockerArch(), b)
	}
}

// blobs are the digests of img's config and layers.
func blobs(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	config, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	hashes := []v1.Hash{config}
	for _, l := range ls {
		d, err := l.Digest()
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, d)
	}
	return hashes
}

func checkConfig(t *testing.T, img v1.Image, p program, o options, arch string) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if want := []string{"/" + p.path}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("Entrypoint %q, want %q", c.Entrypoint, want)
	}
	if c.User != "65532:65532" {
		t.Errorf("User %q, want 65532:65532", c.User)
	}
	if c.WorkingDir != "/" {
		t.Errorf("WorkingDir %q, want /", c.WorkingDir)
	}
	var ports []string
	for port := range c.ExposedPorts {
		ports = append(ports, port)
	}
	if !sameSet(ports, p.ports) {
		t.Errorf("ExposedPorts %q, want %q", ports, p.ports)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.source":   o.source,
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.revision,
	} {
		if got := c.Labels[k]; got != want {
			t.Errorf("label %s %q, want %q", k, got, want)
		}
	}
	if cf.OS != "linux" || cf.Architecture != arch || !cf.Created.Equal(o.created) {
		t.Errorf("os %s arch %s created %s, want linux %s %s", cf.OS, cf.Architecture, cf.Created, arch, o.created)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// checkFiles reads the image's root filesystem, checks the user it runs as
// exists and is not root, the CA certificates parse and the binary is
// executable (and, for coredns-mcs, may bind port 53), and returns the
// regular files by path.
func checkFiles(t *testing.T, img v1.Image, p program) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	unpack(t, img, func(h *tar.Header, body io.Reader) {
		b, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = b
		if h.Name != p.path {
			return
		}
		if h.Mode != 0o755 || h.Uid != 0 {
			t.Errorf("/%s: mode %o uid %d, want 755 0", h.Name, h.Mode, h.Uid)
		}
		if got, want := h.PAXRecords["SCHILY.xattr.security.capability"], netBindServiceCap; p.bindLow && got != want {
			t.Errorf("/%s: security.capability %x, want %x (cap_net_bind_service=+ep)", h.Name, got, want)
		}
	})
	checkUser(t, files["etc/passwd"], files["etc/group"])
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"]) {
		t.Error("/etc/ssl/certs/ca-certificates.crt holds no certificate")
	} else if n := len(pool.Subjects()); n < 100 { //nolint:staticcheck // counting, not verifying
		t.Errorf("/etc/ssl/certs/ca-certificates.crt holds %d certificates, want Mozilla's 100+", n)
	}
	if _, ok := files[p.path]; !ok {
		t.Fatalf("no /%s in the image", p.path)
	}
	return files
}

// unpack reads each of img's layers as a runtime pulls and unpacks it,
// and calls f with each entry: the blob must have the digest and size the
// manifest gives it, its uncompressed tar the config's diff_id. Each layer
// is decompressed once: under -race that is most of the test's time.
func unpack(t *testing.T, img v1.Image, f func(*tar.Header, io.Reader)) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != len(cf.RootFS.DiffIDs) {
		t.Fatalf("%d layers, %d diff_ids", len(m.Layers), len(cf.RootFS.DiffIDs))
	}
	for i, d := range m.Layers {
		blob := readBlob(t, img, d.Digest)
		if got, size, err := v1.SHA256(bytes.NewReader(blob)); err != nil || got != d.Digest || size != d.Size {
			t.Fatalf("layer %s: digest %s size %d (%v), want size %d", d.Digest, got, size, err, d.Size)
		}
		gz, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			t.Fatalf("layer %s: %v", d.Digest, err)
		}
		diffID := sha256.New()
		tr := io.TeeReader(gz, diffID)
		entries(t, tr, f)
		// What follows the tar's end, which the tar reader leaves.
		if _, err := io.Copy(io.Discard, tr); err != nil {
			t.Fatalf("layer %s: %v", d.Digest, err)
		}
		if got := hex.EncodeToString(diffID.Sum(nil)); got != cf.RootFS.DiffIDs[i].Hex {
			t.Errorf("layer %s: uncompressed sha256:%s, want the config's diff_id %s", d.Digest, got, cf.RootFS.DiffIDs[i])
		}
	}
}

// readBlob is the compressed layer of img with digest.
func readBlob(t *testing.T, img v1.Image, digest v1.Hash) []byte {
	t.Helper()
	l, err := img.LayerByDigest(digest)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// checkUser finds the image's user, 65532, in /etc/passwd and its group in
// /etc/group.
func checkUser(t *testing.T, passwd, group []byte) {
	t.Helper()
	if !hasLine(passwd, "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no user nonroot 65532:65532:\n%s", passwd)
	}
	if !hasLine(group, "nonroot:x:65532:") {
		t.Errorf("/etc/group has no group nonroot 65532:\n%s", group)
	}
}

func hasLine(b []byte, prefix string) bool {
	for line := range strings.Lines(string(b)) {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

// machines are the ELF machines of the images' architectures.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// checkELF checks the binary is a static executable for arch, as file(1)
// would say: its machine, and no interpreter to load shared libraries.
func checkELF(t *testing.T, binary []byte, arch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatal(err)
	}
	if want, ok := machines[arch]; f.Machine != want || !ok || f.Type != elf.ET_EXEC {
		t.Errorf("%s %s, want an executable for %s (%s)", f.Type, f.Machine, arch, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("dynamically linked (it has an interpreter), want static")
		}
	}
}

// checkVersion runs the binary taken out of the image with -version.
func checkVersion(ctx context.Context, t *testing.T, binary []byte, dir, version string) {
	t.Helper()
	exe := filepath.Join(dir, "from-image")
	if err := os.WriteFile(exe, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, exe, "-version").CombinedOutput()
	if err != nil {
		t.Fatalf("-version: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte(version)) {
		t.Errorf("-version printed %q, want it to contain %q", out, version)
	}
}

// entries calls f with each entry of the tar stream r and its body.
func entries(t *testing.T, r io.Reader, f func(*tar.Header, io.Reader)) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		f(h, tr)
	}
}

func untar(t *testing.T, archive, dir string) {
	t.Helper()
	if out, err := exec.Command("tar", "-xf", archive, "-C", dir).CombinedOutput(); err != nil {
		t.Fatalf("tar -xf %s: %v\n%s", archive, err, out)
	}
}

func fileSum(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
