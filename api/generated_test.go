package api_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedFilesAreCurrent regenerates the deepcopy functions and the
// CRD from the types and fails when the committed files differ: run
// `make generate` after changing api/.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	gen := filepath.Join(out, "controller-gen")
	run(t, root, "go", "build", "-C", "api/codegen", "-o", gen, "sigs.k8s.io/controller-tools/cmd/controller-gen")
	run(t, root, gen, "object", "crd", "paths=./api/...", "output:object:dir="+out, "output:crd:dir="+out)

	for generated, committed := range map[string]string{
		"zz_generated.deepcopy.go":                     "api/v1alpha1/zz_generated.deepcopy.go",
		"mcs.coredns-mcs.io_multiclusterservices.yaml": "deploy/crds/mcs.coredns-mcs.io_multiclusterservices.yaml",
	} {
		want, err := os.ReadFile(filepath.Join(out, generated))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(root, committed))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run make generate", committed)
		}
	}
}

func run(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}
