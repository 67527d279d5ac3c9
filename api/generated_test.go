package api_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

const (
	module    = "github.com/coredns-mcs/coredns-mcs"
	clientPkg = module + "/api/client"
	apiPkg    = module + "/api/v1alpha1"
	header    = "api/codegen/boilerplate.go.txt"
)

// clientTrees are the directories of api/client that client-gen, lister-gen
// and informer-gen make whole: every file in them is generated.
var clientTrees = []string{"clientset", "listers", "informers"}

// TestGeneratedFilesAreCurrent regenerates the deepcopy functions, the CRD
// and the typed clientset, listers and informers from the types, the same
// way `make generate` does, and fails when a committed file differs, is
// missing, or would no longer be generated: run `make generate` after
// changing api/.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	bin := filepath.Join(out, "bin") + string(filepath.Separator)
	run(t, root, "go", "build", "-C", "api/codegen", "-o", bin,
		"sigs.k8s.io/controller-tools/cmd/controller-gen",
		"k8s.io/code-generator/cmd/client-gen",
		"k8s.io/code-generator/cmd/lister-gen",
		"k8s.io/code-generator/cmd/informer-gen")

	run(t, root, bin+"controller-gen", "object", "crd", "paths=./api/...", "output:object:dir="+out, "output:crd:dir="+out)
	for generated, committed := range map[string]string{
		"zz_generated.deepcopy.go":                     "api/v1alpha1/zz_generated.deepcopy.go",
		"mcs.coredns-mcs.io_multiclusterservices.yaml": "deploy/crds/mcs.coredns-mcs.io_multiclusterservices.yaml",
	} {
		same(t, filepath.Join(out, generated), filepath.Join(root, committed), committed)
	}

	client := filepath.Join(out, "client")
	run(t, root, bin+"client-gen", "--go-header-file", header, "--clientset-name", "versioned",
		"--input-base", module, "--input", "api/v1alpha1",
		"--output-dir", filepath.Join(client, "clientset"), "--output-pkg", clientPkg+"/clientset")
	run(t, root, bin+"lister-gen", "--go-header-file", header,
		"--output-dir", filepath.Join(client, "listers"), "--output-pkg", clientPkg+"/listers", apiPkg)
	run(t, root, bin+"informer-gen", "--go-header-file", header,
		"--versioned-clientset-package", clientPkg+"/clientset/versioned", "--listers-package", clientPkg+"/listers",
		"--output-dir", filepath.Join(client, "informers"), "--output-pkg", clientPkg+"/informers", apiPkg)

	want := files(t, client)
	got := files(t, filepath.Join(root, "api", "client"))
	if len(want) == 0 {
		t.Fatal("the client generators made no files")
	}
	for _, f := range want {
		committed := filepath.Join("api", "client", f)
		if !slices.Contains(got, f) {
			t.Errorf("%s is missing: run make generate", committed)
			continue
		}
		same(t, filepath.Join(client, f), filepath.Join(root, committed), committed)
	}
	for _, f := range got {
		if !slices.Contains(want, f) {
			t.Errorf("%s is no longer generated: run make generate", filepath.Join("api", "client", f))
		}
	}
}

// files lists the files of the generated trees under dir, relative to dir.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var list []string
	for _, tree := range clientTrees {
		err := filepath.WalkDir(filepath.Join(dir, tree), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(dir, path)
			list = append(list, rel)
			return err
		})
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	return list
}

func same(t *testing.T, generated, committed, name string) {
	t.Helper()
	want, err := os.ReadFile(generated)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale: run make generate", name)
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
