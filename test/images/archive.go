package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeArchive writes idx, named ref, to path as a tar that is at once an
// OCI image layout (index.json naming idx, oci-layout, blobs/sha256/…: ctr
// images import, kind load image-archive, skopeo oci-archive:, Docker with
// the containerd image store) and a docker save archive (manifest.json
// pointing into the same blobs: docker load into Docker's own image store,
// crane push of the tar). Entries are sorted, owned by root and stamped
// with the image's creation time, so that the same index gives the same
// bytes. It returns the index's digest.
func writeArchive(idx v1.ImageIndex, ref string, created time.Time, path string) (v1.Hash, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".layout-")
	if err != nil {
		return v1.Hash{}, err
	}
	defer os.RemoveAll(dir)
	l, err := layout.Write(dir, empty.Index)
	if err != nil {
		return v1.Hash{}, err
	}
	// containerd and Docker 25+ name the image after io.containerd.image.name;
	// the OCI ref name is the tag, as docker save writes it.
	if err := l.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})); err != nil {
		return v1.Hash{}, err
	}
	img, err := platformImage(idx, dockerArch())
	if err != nil {
		return v1.Hash{}, err
	}
	manifest, err := dockerManifest(img, tag)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), manifest, 0o644); err != nil {
		return v1.Hash{}, err
	}
	tmp := path + ".tmp"
	if err := tarDir(dir, created, tmp); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, err
	}
	return digest, os.Rename(tmp, path)
}

// dockerArch is the architecture of the one image manifest.json holds: a
// docker save archive has no platforms, and docker load gives the tag to
// the last image listed under it. It is the building machine's, as ctr
// export picks from an index, so that make images then docker load gives
// an image that runs there; amd64 on a machine of any other architecture.
func dockerArch() string {
	if slices.Contains(arches, runtime.GOARCH) {
		return runtime.GOARCH
	}
	return arches[0]
}

// platformImage is idx's image for linux/arch.
func platformImage(idx v1.ImageIndex, arch string) (v1.Image, error) {
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("no image for linux/%s in the index", arch)
}

// dockerManifest is docker save's manifest.json for img, pointing at the
// blobs of the OCI layout.
func dockerManifest(img v1.Image, tag name.Tag) ([]byte, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	d := tarball.Descriptor{Config: blobPath(m.Config.Digest), RepoTags: []string{tag.Name()}}
	for _, l := range m.Layers {
		d.Layers = append(d.Layers, blobPath(l.Digest))
	}
	return json.Marshal(tarball.Manifest{d})
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }

// tarDir writes the files under dir to path, sorted by name, with fixed
// owners, modes and times.
func tarDir(dir string, created time.Time, path string) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		names = append(names, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, n := range names {
		if err := addFile(tw, dir, n, created); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, dir, rel string, created time.Time) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: rel + "/", Mode: 0o755, ModTime: created})
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: 0o644, Size: st.Size(), ModTime: created}); err != nil {
		return err
	}
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
