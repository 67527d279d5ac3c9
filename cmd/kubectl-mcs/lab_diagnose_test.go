//go:build lab

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/utils/ptr"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// diagnose on the lab: a healthy service passes every check; then each
// link of the path is broken in turn, as it breaks on a real fleet, and
// diagnose names it as the first broken link (or, where the controller
// reacts to the break itself, among the failures), exits 1, and passes
// again once it is repaired. member1 provides foo to member2 through a
// MultiClusterService; member2's CoreDNS is a Deployment kwok runs, whose
// pod's address a real coredns-mcs serves /ready and /metrics on, so that
// diagnose reads them through member2's API server as it would on a fleet.
func TestDiagnose(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ns := l.Namespace(t)
	ctl := ns + "-mcs"
	l.NamedNamespace(t, ctl, labtest.Hub)
	for _, m := range []string{labtest.Member1, labtest.Member2} {
		joinLab(t, m, ctl)
		t.Cleanup(func() {
			// The controller has stopped by then: nothing to wait for.
			_, _ = kubectlMCS(t, "unjoin", m, "--context", m, "--hub-context", labtest.Hub, "--controller-namespace", ctl, "--timeout", "0s")
		})
	}
	corefile(t, labtest.Member2, labtest.Member2)
	corednsRBAC(t)
	podIP := corednsDeployment(t)
	dnsAddr, stopDNS := podCoreDNS(t, podIP)
	// The controller renews no token (--renew-credentials-before 0), so
	// that diagnose sees join's 10-minute token below about to lapse. It
	// leads by its Lease on the hub, which diagnose checks.
	controllerArgs := []string{"--kubeconfig", l.KubeconfigOf(t, labtest.Hub), "--namespace", ctl, "--watch-namespaces", ns, "--probe-interval", "1s", "--renew-credentials-before", "0"}
	sourceLeaseCleaned(t)
	controller := startLabController(t, controllerArgs)
	l.Workload(t, labtest.Member1, ns, "foo", 2, false)
	provide(t, ns)

	d := diagnoser{args: []string{"diagnose", "foo", "-n", ns, "--hub-context", labtest.Hub, "--controller-namespace", ctl, "--dns", "member2=" + dnsAddr}}
	d.healthy(t)

	{ // hub
		t.Log("breaking: hub")
		l.ApplyMultiClusterService(t, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{"member9"}, []v1alpha1.ClusterName{labtest.Member2}))
		d.first(t, linkHub, "", `unknown cluster "member9"`, "edit mcsvc foo")
		provide(t, ns)
		d.healthy(t)
	}
	{ // export
		t.Log("breaking: export")
		// bar is exported by member1, which has no Service bar.
		l.Apply(t, labtest.Member1, labtest.ServiceExport(ns, "bar"))
		bar := diagnoser{args: []string{"diagnose", "bar", "-n", ns, "--hub-context", labtest.Hub, "--controller-namespace", ctl}}
		bar.first(t, linkExport, labtest.Member1, "Valid=False (NoService)", "reason NoService")
	}
	{ // credentials
		// A token as short as a cloud caps them, just issued, is no
		// problem: it is renewed two thirds into its lifetime, and only
		// one whose renewal is overdue is reported (TestCredentialReports
		// and the expired case of TestDiagnoseNamesTheFirstBrokenLink
		// hold the failures).
		t.Log("not breaking: a short token, just issued")
		joinLab(t, labtest.Member2, ctl, "--duration", "10m")
		d.healthy(t)
		joinLab(t, labtest.Member2, ctl)
		d.healthy(t)
	}
	{ // controller RBAC
		t.Log("breaking: controller RBAC")
		del(t, l.Client(t, labtest.Member2).RbacV1().ClusterRoleBindings(), "mcs-member")
		d.names(t, linkMember, labtest.Member2, "denied: ", "kubectl mcs join member2 --context member2")
		joinLab(t, labtest.Member2, ctl)
		d.healthy(t)
	}
	{ // controller stopped
		t.Log("breaking: controller stopped")
		if err := controller.Stop(process.StopGrace); err != nil {
			t.Fatal(err)
		}
		// It released its Lease: nobody leads, the first broken link;
		// then each break, in the path's reverse order.
		d.first(t, linkHub, "", "Lease mcs-controller is released: nobody leads", "No replica leads")
		d.names(t, linkLease, labtest.Member2, "past its 20 s: coredns-mcs calls member1 stale", `mcs_member_reachable{cluster="member1"}`)
		slices := l.Client(t, labtest.Member2).DiscoveryV1().EndpointSlices(ns)
		list, err := slices.List(t.Context(), metav1.ListOptions{LabelSelector: "multicluster.kubernetes.io/service-name=foo"})
		if err != nil || len(list.Items) == 0 {
			t.Fatalf("member2's imported slices: %v, %d", err, len(list.Items))
		}
		del(t, slices, list.Items[0].Name)
		d.names(t, linkSlices, labtest.Member2, list.Items[0].Name+" (of member1/", "is it running")
		del(t, l.Client(t, labtest.Member2).CoreV1().Services(ns), "derived-foo")
		d.names(t, linkDerived, labtest.Member2, "there is no derived-foo", "is the controller running")
		imports, err := mcsclient.NewForConfig(l.Config(t, labtest.Member2))
		if err != nil {
			t.Fatal(err)
		}
		strategy := `{"metadata":{"annotations":{"` + api.AnnotationStrategy + `":"LocalFirst"}}}`
		if _, err := imports.MulticlusterV1beta1().ServiceImports(ns).Patch(t.Context(), "foo", types.MergePatchType, []byte(strategy), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		d.names(t, linkImport, labtest.Member2, "its strategy annotation is LocalFirst", "Answers are still local-only")
		controller = startLabController(t, controllerArgs)
		// Applied again so that its cleanup, which needs a controller to
		// drop the finalizer, runs before this controller stops.
		provide(t, ns)
		d.healthy(t)
	}
	{ // coredns image: judged by what the pod runs (its metrics are mcs's),
		// not by the image's name. The pod here is a real coredns-mcs, so a
		// stock image is the unit tests' (TestDiagnoseNamesTheFirstBrokenLink).
		t.Log("a mirrored coredns image")
		setImage(t, "mirror.example/platform/dns:1.12.1-7")
		d.healthy(t)
		setImage(t, corednsImage)
	}
	{ // mcs stanza
		t.Log("breaking: mcs stanza")
		corefile(t, labtest.Member2, "member9")
		d.first(t, linkCoreDNS, labtest.Member2, "the mcs stanza says cluster member9", "set `cluster member2` in the mcs stanza")
		l.Apply(t, labtest.Member2, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": ".:53 {\n    kubernetes cluster.local\n}\n"}})
		d.first(t, linkCoreDNS, labtest.Member2, "the Corefile has no mcs stanza", "apply deploy/overlays/member2")
		// Without the cluster option, mcs takes the name from the
		// ClusterProperty, whose CRD the lab does not serve.
		text, err := os.ReadFile(filepath.Join(l.Root(), "corefile", "Corefile"))
		if err != nil {
			t.Fatal(err)
		}
		l.Apply(t, labtest.Member2, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": strings.Replace(string(text), "cluster member1\n", "", 1)}})
		d.first(t, linkCoreDNS, labtest.Member2, "there is no ClusterProperty cluster.clusterset.k8s.io (or its CRD is not served)", "set `cluster member2` in the mcs stanza")
		corefile(t, labtest.Member2, labtest.Member2)
		d.healthy(t)
	}
	{ // coredns RBAC
		t.Log("breaking: coredns RBAC")
		del(t, l.Client(t, labtest.Member2).RbacV1().ClusterRoleBindings(), corednsRole)
		d.first(t, linkCoreDNS, labtest.Member2, "kube-system/coredns is denied list /services", "coredns-rbac.yaml")
		corednsRBAC(t)
		d.healthy(t)
	}
	{ // coredns not ready
		t.Log("breaking: coredns not ready")
		stopDNS()
		d.first(t, linkCoreDNS, labtest.Member2, "pod "+corednsPodName(t)+" is not ready on :8181/ready", "grep plugin/mcs")
		d.names(t, linkDNS, labtest.Member2, "no answer", "")
	}
}

// sourceLeaseCleaned deletes, at the end, the Lease source-member1 that
// the controller makes in member2 through the join's account (which
// deploy/member's admission policy keeps out of every other write in
// mcs-system): the lab's later tests start without it.
func sourceLeaseCleaned(t *testing.T) {
	t.Helper()
	leases := labtest.Get(t).Client(t, labtest.Member2).CoordinationV1().Leases(api.LeaseNamespace)
	t.Cleanup(func() {
		_ = leases.Delete(context.Background(), api.LeasePrefix+labtest.Member1, metav1.DeleteOptions{})
	})
}

// diagnoser runs one diagnose command and checks what it says.
type diagnoser struct{ args []string }

// run is diagnose's JSON document and exit status.
func (d diagnoser) run(t *testing.T) (*Diagnosis, int, string) {
	var out bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs(append(d.args, "-o", "json", "--kubeconfig", labtest.Get(t).Kubeconfig()))
	code := exitCode(root.ExecuteContext(t.Context()), &out)
	var doc Diagnosis
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		return nil, code, out.String()
	}
	return &doc, code, out.String()
}

// healthy waits until every check passes and diagnose exits 0.
func (d diagnoser) healthy(t *testing.T) {
	t.Helper()
	labtest.Eventually(t, 2*time.Minute, func(context.Context) error {
		doc, code, out := d.run(t)
		if code != 0 || doc == nil || doc.Failed != 0 || doc.Unknown != 0 {
			return fmt.Errorf("exit %d, want 0 with every check passed:\n%s", code, out)
		}
		return nil
	})
}

// first waits until the first broken link is link's check of cluster,
// saying problem and fix, and diagnose exits 1.
func (d diagnoser) first(t *testing.T, link, cluster, problem, fix string) {
	t.Helper()
	d.wait(t, link, cluster, problem, fix, true)
}

// names waits until link's check of cluster fails, saying problem and fix,
// wherever it is on the path.
func (d diagnoser) names(t *testing.T, link, cluster, problem, fix string) {
	t.Helper()
	d.wait(t, link, cluster, problem, fix, false)
}

func (d diagnoser) wait(t *testing.T, link, cluster, problem, fix string, first bool) {
	t.Helper()
	labtest.Eventually(t, 2*time.Minute, func(context.Context) error {
		doc, code, out := d.run(t)
		if code != 1 || doc == nil {
			return fmt.Errorf("exit %d, want 1:\n%s", code, out)
		}
		checks := doc.Checks
		if first {
			checks = nil
			if doc.FirstBroken != nil {
				checks = []Check{*doc.FirstBroken}
			}
		}
		for _, c := range checks {
			if c.Verdict == verdictFail && c.Link == link && c.Cluster == cluster && strings.Contains(c.Problem, problem) && strings.Contains(c.Fix, fix) {
				return nil
			}
		}
		return fmt.Errorf("want %s %s failing (first: %t) with %q, fix %q:\n%s", link, cluster, first, problem, fix, out)
	})
}

// joinLab runs kubectl mcs join for member with the controller in ctl.
func joinLab(t *testing.T, member, ctl string, args ...string) {
	t.Helper()
	join := append([]string{"join", member, "--context", member, "--hub-context", labtest.Hub, "--controller-namespace", ctl}, args...)
	if out, err := kubectlMCS(t, join...); err != nil {
		t.Fatalf("join: %v\n%s", err, out)
	}
}

// startLabController starts mcs-controller with args and waits until it
// is ready.
func startLabController(t *testing.T, args []string) *process.Process {
	t.Helper()
	p, addr := labtest.StartController(t, labtest.Get(t).Binary(t, "mcs-controller"), args...)
	labtest.Eventually(t, time.Minute, process.HTTPOK("http://"+addr+"/readyz"))
	return p
}

// deleter is any typed client's Delete.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

func del(t *testing.T, c deleter, name string) {
	t.Helper()
	if err := c.Delete(t.Context(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting %s: %v", name, err)
	}
}

// corednsImage is the image member2's CoreDNS Deployment says it runs;
// kwok runs no container, the test's coredns-mcs plays its pod.
const corednsImage = "registry.example/coredns-mcs:lab"

// corednsRole is the ClusterRole and ClusterRoleBinding that grant
// CoreDNS's ServiceAccount what mcs reads, as deploy/member's patch of
// system:coredns does (the lab has no kubeadm add-on to patch).
const corednsRole = "diagnose-test-coredns"

// corednsRBAC grants member2's kube-system/coredns what mcs lists and
// watches, for the rest of the test.
func corednsRBAC(t *testing.T) {
	t.Helper()
	l := labtest.Get(t)
	sa := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "kube-system", Name: "coredns"}}
	read := []string{"list", "watch"}
	l.Apply(t, labtest.Member2,
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: corednsRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: read},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: read},
			{APIGroups: []string{"multicluster.x-k8s.io"}, Resources: []string{"serviceimports"}, Verbs: read},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: corednsRole}, Subjects: sa, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: corednsRole}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: api.LeaseNamespace, Name: corednsRole}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: read},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: api.LeaseNamespace, Name: corednsRole}, Subjects: sa, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: corednsRole}},
	)
	t.Cleanup(func() {
		ctx := context.Background()
		rbac := l.Client(t, labtest.Member2).RbacV1()
		_ = rbac.ClusterRoleBindings().Delete(ctx, corednsRole, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, corednsRole, metav1.DeleteOptions{})
		_ = rbac.RoleBindings(api.LeaseNamespace).Delete(ctx, corednsRole, metav1.DeleteOptions{})
		_ = rbac.Roles(api.LeaseNamespace).Delete(ctx, corednsRole, metav1.DeleteOptions{})
	})
}

// corednsDeployment runs member2's kube-system/coredns as a Deployment of
// one pod, which kwok makes Running and Ready, and returns its address.
// The Deployment is then paused: a change of its image (a break below)
// would otherwise roll a new pod, at an address nothing serves.
func corednsDeployment(t *testing.T) string {
	t.Helper()
	l := labtest.Get(t)
	labels := map[string]string{"k8s-app": "kube-dns"}
	l.Apply(t, labtest.Member2, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{ServiceAccountName: "coredns", Containers: []corev1.Container{{Name: "coredns", Image: corednsImage}}},
			},
		},
	})
	deployments := l.Client(t, labtest.Member2).AppsV1().Deployments("kube-system")
	t.Cleanup(func() {
		_ = deployments.Delete(context.Background(), "coredns", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)})
	})
	var ip string
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		pods, err := l.Client(t, labtest.Member2).CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 || !labtest.PodReady(&pods.Items[0]) || pods.Items[0].Status.PodIP == "" {
			return fmt.Errorf("CoreDNS's pods: %d, want one Ready with an address", len(pods.Items))
		}
		ip = pods.Items[0].Status.PodIP
		return nil
	})
	if _, err := deployments.Patch(t.Context(), "coredns", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return ip
}

// corednsPodName is the name of member2's CoreDNS pod.
func corednsPodName(t *testing.T) string {
	t.Helper()
	pods, err := labtest.Get(t).Client(t, labtest.Member2).CoreV1().Pods("kube-system").List(t.Context(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("CoreDNS's pods: %v", err)
	}
	return pods.Items[0].Name
}

// setImage sets the image of member2's CoreDNS Deployment (paused: no pod
// changes).
func setImage(t *testing.T, image string) {
	t.Helper()
	body := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":"coredns","image":%q}]}}}}`, image)
	if _, err := labtest.Get(t).Client(t, labtest.Member2).AppsV1().Deployments("kube-system").Patch(t.Context(), "coredns", types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// podCoreDNS runs bin/coredns-mcs as member2's CoreDNS pod: its ready
// plugin and metrics on the pod's address (8181, 9153, as the shipped
// Corefile has them), which it binds on this host's loopback device so
// that member2's API server, whose pods/proxy refuses loopback addresses,
// reaches it; DNS on a loopback port, which it returns with a stop. Binding
// the address takes root, as the lab's network does.
func podCoreDNS(t *testing.T, podIP string) (dnsAddr string, stop func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("serving the CoreDNS pod's address takes root (ip addr add), as the lab's network does")
	}
	// replace, not add: an address a killed run left behind is taken over.
	if out, err := exec.Command("ip", "addr", "replace", podIP+"/32", "dev", "lo").CombinedOutput(); err != nil {
		t.Fatalf("ip addr replace %s/32 dev lo: %v: %s", podIP, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "addr", "del", podIP+"/32", "dev", "lo").Run() })
	l := labtest.Get(t)
	dir := t.TempDir()
	p, ports, err := process.StartCoreDNSOnFreePorts(t.Context(), 1, time.Minute, func(ports []int) (process.Config, string, error) {
		corefile := filepath.Join(dir, "Corefile")
		err := os.WriteFile(corefile, fmt.Appendf(nil, podCorefile, ports[0], podIP, l.Kubeconfig(), labtest.Member2), 0o644)
		return process.CoreDNS("coredns-mcs member2 pod", l.Binary(t, "coredns-mcs"), corefile, filepath.Join(dir, "coredns.log")), fmt.Sprintf("127.0.0.1:%d", ports[0]), err
	})
	if err != nil {
		t.Fatal(err)
	}
	p.StopAtCleanup(t)
	dnsAddr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	if err := p.WaitFor(t.Context(), time.Minute, process.CoreDNSReady(dnsAddr, "http://"+podIP+":8181/ready")); err != nil {
		t.Fatal(err)
	}
	return dnsAddr, func() { _ = p.Stop(process.StopGrace) }
}

// podCorefile is corefile/Corefile's mcs and kubernetes stanzas with the
// lab's kubeconfig, DNS on loopback, ready and prometheus on the pod's
// address.
const podCorefile = `cluster.local:%[1]d clusterset.local:%[1]d {
    bind 127.0.0.1
    errors
    ready %[2]s:8181
    prometheus %[2]s:9153
    mcs cluster.local clusterset.local {
        kubeconfig %[3]s %[4]s
        cluster %[4]s
    }
    kubernetes cluster.local {
        kubeconfig %[3]s %[4]s
    }
}
`
