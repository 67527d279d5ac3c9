package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Pinned, deploy/'s overlays render every Deployment of the project with
// its image by digest, and keep the rest of their kustomization.yaml.
func TestPinOverlays(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../deploy")); err != nil {
		t.Fatal(err)
	}
	pins := map[string]pinned{
		"mcs-controller": {"registry.example.org/team/mcs-controller", "sha256:" + strings.Repeat("a", 64)},
		"coredns-mcs":    {"registry.example.org/team/coredns-mcs", "sha256:" + strings.Repeat("b", 64)},
	}
	hub := filepath.Join(dir, "overlays", "hub", "kustomization.yaml")
	before, err := os.ReadFile(hub)
	if err != nil {
		t.Fatal(err)
	}
	if err := pinOverlays(filepath.Join(dir, "overlays"), pins); err != nil {
		t.Fatal(err)
	}
	for overlay, want := range map[string]pinned{"hub": pins["mcs-controller"], "member1": pins["coredns-mcs"], "member2": pins["coredns-mcs"]} {
		out := render(t, filepath.Join(dir, "overlays", overlay))
		if ref := want.name + "@" + want.digest; !strings.Contains(out, "image: "+ref+"\n") {
			t.Errorf("overlay %s renders no image %s:\n%s", overlay, ref, out)
		}
		if strings.Contains(out, ":latest") {
			t.Errorf("overlay %s still renders an image by tag", overlay)
		}
	}
	after, err := os.ReadFile(hub)
	if err != nil {
		t.Fatal(err)
	}
	// Its comments and resources stay.
	for _, line := range strings.Split(string(before), "\n") {
		if strings.HasPrefix(line, "#") && !strings.Contains(string(after), line) {
			t.Errorf("pinning dropped %q from the hub's kustomization.yaml:\n%s", line, after)
		}
	}
}

func render(t *testing.T, dir string) string {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}
