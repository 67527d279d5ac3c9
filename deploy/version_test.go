package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// releaseVersion is the repository's VERSION file: the release the charts,
// the overlays' image tags and the CHANGELOG name (docs/operations.md,
// Releases).
func releaseVersion(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(b))
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(v) {
		t.Fatalf("VERSION holds %q, want a tag vMAJOR.MINOR.PATCH[-PRERELEASE]", v)
	}
	return v
}

// readYAML decodes the YAML file at path, relative to deploy/.
func readYAML(t *testing.T, path string, out any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// One version: the hub chart's version and appVersion, the image tag of
// every kustomization and of the members' Helm values, and the CHANGELOG's
// latest entry are the VERSION file's, so a release changes them together.
func TestOneVersion(t *testing.T) {
	v := releaseVersion(t)
	var chart struct{ Version, AppVersion string }
	readYAML(t, "helm/coredns-mcs-controller/Chart.yaml", &chart)
	if chart.Version != strings.TrimPrefix(v, "v") || chart.AppVersion != v {
		t.Errorf("the hub chart has version %q, appVersion %q; VERSION %s wants %q and %q",
			chart.Version, chart.AppVersion, v, strings.TrimPrefix(v, "v"), v)
	}
	var values struct{ Image struct{ Tag string } }
	readYAML(t, "helm/coredns-member1.values.yaml", &values)
	if values.Image.Tag != v {
		t.Errorf("helm/coredns-member1.values.yaml: image.tag %q, want VERSION's %s", values.Image.Tag, v)
	}
	for _, k := range []string{"member", "overlays/hub", "overlays/member1"} {
		var kust struct {
			Images []struct{ Name, NewTag, Digest string }
		}
		readYAML(t, filepath.Join(k, "kustomization.yaml"), &kust)
		if len(kust.Images) == 0 {
			t.Errorf("%s/kustomization.yaml sets no image", k)
		}
		for _, img := range kust.Images {
			// make pin-images replaces a release's tag with its digest.
			if img.NewTag != v && img.Digest == "" {
				t.Errorf("%s/kustomization.yaml: %s has tag %q, want VERSION's %s (or a digest, make pin-images)", k, img.Name, img.NewTag, v)
			}
		}
	}
	changelog, err := os.ReadFile(filepath.Join("..", "CHANGELOG.md"))
	if err != nil {
		t.Fatal(err)
	}
	entries := regexp.MustCompile(`(?m)^## \[([^\]]+)\]`).FindAllStringSubmatch(string(changelog), 2)
	if len(entries) != 2 || entries[0][1] != "Unreleased" || entries[1][1] != v {
		t.Errorf("CHANGELOG.md's first entries are %v, want [Unreleased] then [%s]", entries, v)
	}
}

// A tagged commit is the release VERSION names: a tag of another version
// on it would build images (make images names them by git describe) that
// the charts and overlays do not run.
func TestTagIsVersion(t *testing.T) {
	v := releaseVersion(t)
	out, err := exec.Command("git", "tag", "--points-at", "HEAD", "--list", "v*").Output()
	if err != nil {
		t.Fatalf("git tag --points-at HEAD: %v", err)
	}
	for _, tag := range strings.Fields(string(out)) {
		if tag != v {
			t.Errorf("HEAD is tagged %s, but VERSION says %s: set VERSION, the charts and CHANGELOG.md to the tag first", tag, v)
		}
	}
}
