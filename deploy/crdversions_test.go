package deploy_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// crdVersions is a CRD's row in docs/operations.md's table of CRD versions.
type crdVersions struct {
	served  []string
	storage string
}

// documentedCRDs reads that table: | `name` | where | served | storage |.
func documentedCRDs(t *testing.T) map[string]crdVersions {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z0-9.-]+)` \\| [^|]+ \\| ([^|]+) \\| ([^|]+) \\|$")
	out := map[string]crdVersions{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		out[m[1]] = crdVersions{served: strings.Split(strings.TrimSpace(m[2]), ", "), storage: strings.TrimSpace(m[3])}
	}
	if len(out) == 0 {
		t.Fatal("docs/operations.md has no table of CRD versions (| `name` | where | served | storage |)")
	}
	return out
}

// Every CRD deploy/ ships has exactly one storage version, and serves and
// stores the versions docs/operations.md ("CRD versions") says, which is
// what an upgrade that adds a version starts from; every CRD the page
// lists is shipped. The chart's copies are links to these files
// (TestHubChartLinksDeploysFiles).
func TestCRDVersionsAreDocumented(t *testing.T) {
	documented := documentedCRDs(t)
	shipped := map[string]bool{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			if d != nil && d.IsDir() && d.Name() == "templates" {
				return fs.SkipDir // Helm's templates, which are not YAML yet
			}
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, u := range decodeManifests(t, string(b)) {
			if u.GetKind() != "CustomResourceDefinition" {
				continue
			}
			shipped[u.GetName()] = true
			checkCRDVersions(t, path, u.Object, documented)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range documented {
		if !shipped[name] {
			t.Errorf("docs/operations.md lists the CRD %s, which deploy/ does not ship", name)
		}
	}
}

func checkCRDVersions(t *testing.T, path string, crd map[string]any, documented map[string]crdVersions) {
	t.Helper()
	name := at(crd, "metadata", "name").(string)
	want, ok := documented[name]
	if !ok {
		t.Errorf("%s: the CRD %s is not in docs/operations.md's table of CRD versions", path, name)
		return
	}
	var served, storage []string
	for _, v := range at(crd, "spec", "versions").([]any) {
		v := v.(map[string]any)
		if v["served"] == true {
			served = append(served, v["name"].(string))
		}
		if v["storage"] == true {
			storage = append(storage, v["name"].(string))
		}
	}
	if len(storage) != 1 {
		t.Errorf("%s: %s stores %v, want exactly one storage version", path, name, storage)
	} else if storage[0] != want.storage {
		t.Errorf("%s: %s stores %s, docs/operations.md says %s", path, name, storage[0], want.storage)
	}
	slices.Sort(served)
	if !slices.Equal(served, want.served) {
		t.Errorf("%s: %s serves %v, docs/operations.md says %v", path, name, served, want.served)
	}
}
