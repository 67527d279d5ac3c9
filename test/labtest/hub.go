package labtest

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
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
	return l.KubeconfigOf(t, Members...)
}

// KubeconfigOf writes the lab's kubeconfig with only these contexts, the
// first one current, into the test's temporary directory, and returns its
// path: KubeconfigOf(t, Hub) is mcs-controller's --kubeconfig.
func (l *Lab) KubeconfigOf(t testing.TB, contexts ...string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(l.kubeconfig)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	for name := range cfg.Contexts {
		if !slices.Contains(contexts, name) {
			delete(cfg.Contexts, name)
		}
	}
	cfg.CurrentContext = contexts[0]
	path := filepath.Join(t.TempDir(), strings.Join(contexts, "-")+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return path
}

// TokenKubeconfig writes a kubeconfig of cluster that authenticates as the
// ServiceAccount namespace/name with a fresh token, into the test's
// temporary directory, and returns its path: a client under that account's
// RBAC rules.
func (l *Lab) TokenKubeconfig(t testing.TB, cluster, namespace, name string) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}
	tok, err := l.Client(t, cluster).CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("labtest: a token of ServiceAccount %s/%s in %s: %v", namespace, name, cluster, err)
	}
	cfg, err := clientcmd.LoadFromFile(l.kubeconfig)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	server := cfg.Contexts[cluster].Cluster
	user := namespace + "/" + name
	cfg.Clusters = map[string]*clientcmdapi.Cluster{server: cfg.Clusters[server]}
	cfg.AuthInfos = map[string]*clientcmdapi.AuthInfo{user: {Token: tok.Status.Token}}
	cfg.Contexts = map[string]*clientcmdapi.Context{cluster: {Cluster: server, AuthInfo: user}}
	cfg.CurrentContext = cluster
	path := filepath.Join(t.TempDir(), cluster+"-"+name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatalf("labtest: %v", err)
	}
	return path
}

// ApplyMultiClusterService applies m to the hub and, when the test ends,
// deletes it and waits until it is gone: a controller started before this
// call still runs then (cleanups run last first) and drops its finalizer,
// where one stopped first would leave m, and its namespace terminating, on
// the shared hub.
func (l *Lab) ApplyMultiClusterService(t testing.TB, m *v1alpha1.MultiClusterService) {
	t.Helper()
	l.Apply(t, Hub, m)
	t.Cleanup(func() {
		r := l.Dynamic(t, Hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(m.Namespace)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Delete(ctx, m.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("labtest: deleting MultiClusterService %s/%s: %v", m.Namespace, m.Name, err)
			return
		}
		for ctx.Err() == nil {
			if _, err := r.Get(ctx, m.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("labtest: MultiClusterService %s/%s is still there: is its controller stopped already?", m.Namespace, m.Name)
	})
}
