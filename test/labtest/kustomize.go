package labtest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Kustomize is kustomize build of dir, as an operator runs it, decoded.
func Kustomize(t testing.TB, dir string) []*unstructured.Unstructured {
	t.Helper()
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	text, err := rm.AsYaml()
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var objs []*unstructured.Unstructured
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(text), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := decoder.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("decoding kustomize build %s: %v", dir, err)
		}
		objs = append(objs, u)
	}
}
