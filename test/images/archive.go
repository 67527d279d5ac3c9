package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeArchive writes img, named ref, to path as a tar that is at once an
// OCI image layout (index.json, oci-layout, blobs/sha256/…: ctr images
// import, kind load image-archive, skopeo oci-archive:, Docker 25+) and a
// docker save archive (manifest.json pointing into the same blobs: older
// docker load, crane push). Entries are sorted, owned by root and stamped
// with the image's creation time, so that the same image gives the same
// bytes. It returns the image's manifest digest.
func writeArchive(img v1.Image, ref string, created time.Time, path string) (v1.Hash, error) {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := img.Digest()
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
	if err := l.AppendImage(img, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})); err != nil {
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
