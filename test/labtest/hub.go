package labtest

import (
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/deploy/crds"
)

var crdOnce sync.Once

// InstallCRDs applies the MultiClusterService CRD of deploy/crds to the hub,
// as an operator does, and waits until it is Established.
func (l *Lab) InstallCRDs(t testing.TB) {
	t.Helper()
	crdOnce.Do(func() { l.ApplyYAML(t, Hub, string(crds.MultiClusterService)) })
	l.WaitEstablished(t, Hub, "multiclusterservices.mcs.coredns-mcs.io")
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
