//go:build lab

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// kubectlMCS runs kubectl mcs with args against the lab's kubeconfig and
// returns what it printed.
func kubectlMCS(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs(append(args, "--kubeconfig", labtest.Get(t).Kubeconfig()))
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// join registers member3 in one command: the Secret on the hub holds a
// kubeconfig that authenticates as the controller's ServiceAccount in
// member3 and the export bound given, a running mcs-controller that reads
// member Secrets reaches member3 with it, join again rotates the token and
// keeps the bound, and unjoin takes it all back: the Secret is gone and
// the token no longer authenticates.
func TestJoinAndUnjoin(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub) // the controller's namespace on the hub
	join := []string{"join", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ns, "--duration", "1h"}
	out, err := kubectlMCS(t, append(join, "--dry-run=server")...)
	if _, getErr := l.Client(t, labtest.Hub).CoreV1().Secrets(ns).Get(t.Context(), labtest.Member3, metav1.GetOptions{}); err != nil || !apierrors.IsNotFound(getErr) {
		t.Fatalf("join --dry-run=server: %v, the Secret: %v (want none)\n%s", err, getErr, out)
	}
	out, err = kubectlMCS(t, append(join, "--export-namespaces", "shop,web")...)
	if err != nil || !strings.Contains(out, "member3 joined: Secret "+ns+"/member3 on the hub") {
		t.Fatalf("join: %v\n%s", err, out)
	}
	first := memberToken(t, ns)
	if who := whoAmI(t, first); who != "system:serviceaccount:mcs-system:mcs-member" {
		t.Errorf("the Secret's kubeconfig authenticates as %q, want the controller's ServiceAccount", who)
	}

	_, addr := labtest.StartController(t, l.Binary(t, "mcs-controller"),
		"--kubeconfig", l.KubeconfigOf(t, labtest.Hub), "--namespace", ns, "--watch-namespaces", ns, "--leader-elect=false", "--probe-interval", "1s")
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		families, err := process.Scrape(ctx, "http://"+addr+"/metrics")
		if err != nil {
			return err
		}
		for _, m := range families["mcs_member_reachable"].GetMetric() {
			if m.GetLabel()[0].GetValue() == labtest.Member3 && m.GetGauge().GetValue() == 1 {
				return nil
			}
		}
		return fmt.Errorf("mcs_member_reachable: %v, want member3 reachable", families["mcs_member_reachable"])
	})

	if out, err := kubectlMCS(t, join...); err != nil {
		t.Fatalf("join again: %v\n%s", err, out)
	}
	if memberToken(t, ns) == first {
		t.Error("join again kept the token, want a new one (rotation)")
	}
	// A rotation without --export-namespaces keeps the bound: it never
	// widens what the member may export.
	s, err := l.Client(t, labtest.Hub).CoreV1().Secrets(ns).Get(t.Context(), labtest.Member3, metav1.GetOptions{})
	if err != nil || s.Annotations[api.AnnotationExportNamespaces] != "shop,web" {
		t.Errorf("the Secret after join again: %v, annotations %v, want %s=shop,web kept", err, s.Annotations, api.AnnotationExportNamespaces)
	}

	if out, err := kubectlMCS(t, "unjoin", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ns); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, out)
	}
	if _, err := l.Client(t, labtest.Hub).CoreV1().Secrets(ns).Get(t.Context(), labtest.Member3, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the hub's Secret after unjoin: %v, want it gone", err)
	}
	labtest.Eventually(t, 30*time.Second, func(ctx context.Context) error {
		if who := whoAmI(t, first); who != "" {
			return fmt.Errorf("a token of join still authenticates as %q after unjoin", who)
		}
		return nil
	})
}

// memberToken is the token in the kubeconfig of the hub's Secret member3.
func memberToken(t *testing.T, ns string) string {
	t.Helper()
	s, err := labtest.Get(t).Client(t, labtest.Hub).CoreV1().Secrets(ns).Get(t.Context(), labtest.Member3, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels[api.LabelCluster] != labtest.Member3 {
		t.Errorf("Secret labels %v, want %s=member3", s.Labels, api.LabelCluster)
	}
	cfg, err := clientcmd.Load(s.Data[api.KeyKubeconfig])
	if err != nil {
		t.Fatal(err)
	}
	return cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
}

// whoAmI is who token authenticates as in member3, or "" when it does not.
func whoAmI(t *testing.T, token string) string {
	t.Helper()
	cfg := labtest.Get(t).Config(t, labtest.Member3)
	cfg.BearerToken, cfg.BearerTokenFile = token, ""
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return r.Status.UserInfo.Username
}

// status shows a service as a user checks it by hand across clusters:
// member1 provides foo with 2 ready pods, member2 imports it with
// derived-foo's VIP, one imported slice current with its source and
// member1's Lease fresh, and the MultiClusterService's conditions; after
// a scale-up, the new count, still current.
func TestStatus(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ns := l.Namespace(t)
	ctl := ns + "-mcs"
	l.NamedNamespace(t, ctl, labtest.Hub)
	_, addr := labtest.StartController(t, l.Binary(t, "mcs-controller"), "--kubeconfig", l.KubeconfigOf(t, labtest.Hub),
		"--clusters-kubeconfig", l.MembersKubeconfig(t), "--namespace", ctl, "--watch-namespaces", ns, "--leader-elect=false")
	labtest.Eventually(t, time.Minute, process.HTTPOK("http://"+addr+"/readyz"))
	l.Workload(t, labtest.Member1, ns, "foo", 2, false)
	provide(t, ns)

	for _, pods := range []int{2, 3} {
		l.Apply(t, labtest.Member1, labtest.Deployment(ns, "foo", int32(pods)))
		labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
			var r Report
			if err := statusJSON(t, &r, "foo", "-n", ns); err != nil {
				return err
			}
			return statusSays(r, pods)
		})
	}
	out, err := kubectlMCS(t, "status", "foo", "-n", ns, "--hub-context", labtest.Hub, "--members", "member1,member2")
	if err != nil || !strings.Contains(out, "MEMBER") || !strings.Contains(out, "EndpointSliceApplied=True") {
		t.Errorf("the table: %v\n%s", err, out)
	}

	// Without a service: the fleet, its problems first. A
	// MultiClusterService that names no member is one; foo is synced.
	l.ApplyMultiClusterService(t, labtest.MultiClusterService(ns, "bad", api.RemoteAndLocal, []v1alpha1.ClusterName{"member9"}, nil))
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		var r FleetReport
		if err := statusJSON(t, &r); err != nil {
			return err
		}
		return fleetSays(r, ns)
	})
}

// statusJSON runs kubectl mcs status -o json with args, the hub and
// members 1 and 2, into out.
func statusJSON(t *testing.T, out any, args ...string) error {
	text, err := kubectlMCS(t, append([]string{"status", "--hub-context", labtest.Hub, "--members", "member1,member2", "-o", "json"}, args...)...)
	if err != nil {
		return fmt.Errorf("%v: %s", err, text)
	}
	return json.Unmarshal([]byte(text), out)
}

// fleetSays fails unless r reaches both members, counts ns/foo synced, and
// puts ns/bad's unknown cluster among the problems, before any synced
// service.
func fleetSays(r FleetReport, ns string) error {
	for _, m := range r.Members {
		if m.Error != "" || m.Version == "" {
			return fmt.Errorf("member %+v", m)
		}
	}
	problem := slices.ContainsFunc(r.Problems, func(p string) bool {
		return strings.HasPrefix(p, "MultiClusterService "+ns+"/bad:") && strings.Contains(p, `unknown cluster "member9"`)
	})
	foo := slices.IndexFunc(r.Services, func(s FleetService) bool { return s.Namespace == ns && s.Name == "foo" })
	badAt := slices.IndexFunc(r.Services, func(s FleetService) bool { return s.Namespace == ns && s.Name == "bad" })
	if !problem || foo < 0 || badAt < 0 || !r.Services[foo].Synced || badAt > foo {
		return fmt.Errorf("problems %v, services %+v", r.Problems, r.Services)
	}
	return nil
}

// statusSays fails unless r is foo provided by member1 with pods ready
// endpoints and imported by member2, current.
func statusSays(r Report, pods int) error {
	if len(r.Members) != 2 || r.MultiClusterService == nil {
		return fmt.Errorf("report %+v", r)
	}
	m1, m2 := r.Members[0], r.Members[1]
	switch {
	case m1.Error != "" || m2.Error != "":
		return fmt.Errorf("errors: %q %q", m1.Error, m2.Error)
	case !m1.Service || m1.ReadyEndpoints != pods:
		return fmt.Errorf("member1: service %t, %d ready, want %d", m1.Service, m1.ReadyEndpoints, pods)
	case m2.Import == nil || len(m2.Import.IPs) == 0 || !slices.Equal(m2.Import.IPs, m2.DerivedVIPs) || !slices.Equal(m2.Import.Clusters, []string{labtest.Member1}):
		return fmt.Errorf("member2: import %+v, derived VIPs %v", m2.Import, m2.DerivedVIPs)
	case len(m2.Imported) != 1 || !m2.Imported[0].Current || m2.Imported[0].ReadyEndpoints != pods:
		return fmt.Errorf("member2: imported %+v, want one current slice of %d", m2.Imported, pods)
	case m2.LeaseAges[labtest.Member1] > 30:
		return fmt.Errorf("member2: lease ages %v", m2.LeaseAges)
	case !slices.ContainsFunc(r.MultiClusterService.Conditions, func(c string) bool { return strings.HasPrefix(c, "EndpointSliceApplied=True") }):
		return fmt.Errorf("conditions %v", r.MultiClusterService.Conditions)
	}
	return nil
}

// corefile makes member's ConfigMap kube-system/coredns the shipped member
// Corefile naming cluster, as deploy/overlays does, for the rest of the
// test (the lab runs no CoreDNS of its own).
func corefile(t *testing.T, member, cluster string) {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(labtest.Get(t).Root(), "corefile", "Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
		Data:       map[string]string{"Corefile": strings.Replace(string(text), "cluster member1", "cluster "+cluster, 1)},
	}
	labtest.Get(t).Apply(t, member, cm)
	t.Cleanup(func() {
		_ = labtest.Get(t).Client(t, member).CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "coredns", metav1.DeleteOptions{})
	})
}

// provide makes a MultiClusterService provide foo from member1 to member2
// for the rest of the test.
func provide(t *testing.T, ns string) {
	t.Helper()
	labtest.Get(t).ApplyMultiClusterService(t, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{labtest.Member1}, []v1alpha1.ClusterName{labtest.Member2}))
}
