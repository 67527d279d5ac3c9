//go:build lab

package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	inventoryclient "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/controller/members"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// A fleet registered by ClusterProfiles alone, as a cluster manager writes
// them, reached through the upstream secret-reader access provider (built
// from the module in go.mod): the real mcs-controller, with no member
// Secret, imports member1's export into member2; deleting member1's
// profile retires member1, and its endpoints leave member2.
func TestClusterProfileFleet(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	installClusterProfileCRD(t, l)
	ctl := l.Namespace(t, labtest.Hub)
	apps := l.Namespace(t, labtest.Hub, labtest.Member1, labtest.Member2)
	plugin := buildSecretReader(t, l)
	providers := accessProviders(t, plugin, pluginKubeconfig(t, l, ctl))

	profiles := inventoryclient.NewForConfigOrDie(l.Config(t, labtest.Hub)).ApisV1alpha1().ClusterProfiles(ctl)
	for _, m := range []string{labtest.Member1, labtest.Member2} {
		// What the secret-reader reads: Secret <clusterName>, key token,
		// in its namespace; no cluster label, so no member Secret.
		l.Apply(t, labtest.Hub, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: m, Namespace: ctl},
			Data:       map[string][]byte{"token": []byte(l.Config(t, m).BearerToken)},
		})
		createProfile(t, profiles, clusterProfile(t, l, ctl, m))
	}

	l.Workload(t, labtest.Member1, apps, "foo", 2, false)
	l.Apply(t, labtest.Member1, labtest.ServiceExport(apps, "foo"))
	p, _ := labtest.StartController(t, l.Binary(t, "mcs-controller"), "--kubeconfig", l.KubeconfigOf(t, labtest.Hub),
		"--namespace", ctl, "--watch-namespaces", apps, "--leader-elect=false", "--probe-interval", "1s",
		"--cluster-profile-namespace", ctl, "--cluster-profile-provider-file", providers)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mcs-controller's log: %s", p.Log())
		}
	})
	labtest.Eventually(t, syncWait, func(ctx context.Context) error {
		return importsFrom(ctx, t, labtest.Member1, 2, apps, "foo", labtest.Member2)
	})

	if err := profiles.Delete(t.Context(), labtest.Member1, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		got, err := imported(ctx, t, labtest.Member2, apps, "foo")
		if err != nil {
			return err
		}
		if _, ok := got[labtest.Member1]; ok {
			return fmt.Errorf("member2 still imports %v from member1, whose profile is gone", got[labtest.Member1])
		}
		return nil
	})
}

// installClusterProfileCRD applies deploy/cluster-inventory's CRD to the
// hub, as an operator without a cluster manager does.
func installClusterProfileCRD(t *testing.T, l *labtest.Lab) {
	t.Helper()
	crd, err := os.ReadFile(filepath.Join(l.Root(), "deploy", "cluster-inventory", "multicluster.x-k8s.io_clusterprofiles.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l.ApplyYAML(t, labtest.Hub, string(crd))
	l.WaitEstablished(t, labtest.Hub, "clusterprofiles.multicluster.x-k8s.io")
}

// buildSecretReader builds the upstream secret-reader plugin from the
// module go.mod requires.
func buildSecretReader(t *testing.T, l *labtest.Lab) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "secretreader")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, "sigs.k8s.io/cluster-inventory-api/plugins/secretreader/cmd/plugin")
	cmd.Dir = l.Root()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the secret-reader plugin: %v\n%s", err, b)
	}
	return out
}

// pluginKubeconfig is the hub's kubeconfig with namespace ns, where the
// secret-reader reads its Secrets.
func pluginKubeconfig(t *testing.T, l *labtest.Lab, ns string) string {
	t.Helper()
	path := l.KubeconfigOf(t, labtest.Hub)
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[labtest.Hub].Namespace = ns
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// accessProviders writes the operator's access-provider file: the
// secret-reader, told the hub by KUBECONFIG.
func accessProviders(t *testing.T, plugin, kubeconfig string) string {
	t.Helper()
	file := map[string]any{"providers": []any{map[string]any{
		"name": "secretreader",
		"execConfig": map[string]any{
			"apiVersion": "client.authentication.k8s.io/v1", "command": plugin, "provideClusterInfo": true,
			"env": []any{map[string]any{"name": "KUBECONFIG", "value": kubeconfig}},
		},
	}}}
	data, err := json.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := members.LoadAccessProviders(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// clusterProfile is member's profile as a cluster manager writes it:
// healthy, named by its cluster ID property, reached through the
// secret-reader at the lab's server and CA.
func clusterProfile(t *testing.T, l *labtest.Lab, ns, member string) *inventory.ClusterProfile {
	t.Helper()
	rc := l.Config(t, member)
	now := metav1.NewTime(time.Now())
	return &inventory.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: member, Namespace: ns},
		Spec:       inventory.ClusterProfileSpec{DisplayName: member, ClusterManager: inventory.ClusterManager{Name: "lab"}},
		Status: inventory.ClusterProfileStatus{
			Conditions: []metav1.Condition{{Type: inventory.ClusterConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Healthy", Message: "the lab's", LastTransitionTime: now}},
			Properties: []inventory.Property{{Name: members.PropertyClusterID, Value: member, LastObservedTime: now}},
			AccessProviders: []inventory.AccessProvider{{Name: "secretreader", Cluster: clientcmdv1.Cluster{
				Server: rc.Host, CertificateAuthorityData: rc.CAData,
				Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: []byte(`{"clusterName":"` + member + `"}`)}}},
			}}},
		},
	}
}

// createProfile creates p, then its status, which is a subresource; it is
// deleted when the test ends.
func createProfile(t *testing.T, profiles interface {
	Create(context.Context, *inventory.ClusterProfile, metav1.CreateOptions) (*inventory.ClusterProfile, error)
	UpdateStatus(context.Context, *inventory.ClusterProfile, metav1.UpdateOptions) (*inventory.ClusterProfile, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}, p *inventory.ClusterProfile) {
	t.Helper()
	got, err := profiles.Create(t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = profiles.Delete(context.Background(), p.Name, metav1.DeleteOptions{}) })
	got.Status = p.Status
	if _, err := profiles.UpdateStatus(t.Context(), got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
