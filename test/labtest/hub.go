package labtest

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/deploy/crds"
)

var crdOnce sync.Once

// InstallCRDs applies the MultiClusterService CRD of deploy/crds to the hub,
// as an operator does, and waits until it is Established.
func (l *Lab) InstallCRDs(t testing.TB) {
	t.Helper()
	crdOnce.Do(func() { l.ApplyYAML(t, Hub, string(crds.MultiClusterService)) })
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	Eventually(t, 30*time.Second, func(ctx context.Context) error {
		u, err := l.Dynamic(t, Hub).Resource(crd).Get(ctx, "multiclusterservices.mcs.coredns-mcs.io", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("CRD %s is not Established", u.GetName())
	})
}

// MembersKubeconfig writes a kubeconfig with one context per member and none
// for the hub: mcs-controller's --clusters-kubeconfig.
func (l *Lab) MembersKubeconfig(t testing.TB) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(l.kubeconfig)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	for name := range cfg.Contexts {
		if !slices.Contains(Members, name) {
			delete(cfg.Contexts, name)
		}
	}
	cfg.CurrentContext = Members[0]
	path := filepath.Join(t.TempDir(), "members.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return path
}
