//go:build lab

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// verify on the lab's running pods: coredns-mcs is member1's and
// member2's cluster DNS, the servers are socat and the clients netshoot
// as the lab's kubelet runs them, and kube-proxy carries the connections.
// A healthy fleet passes every check, failover included, and verify
// leaves nothing behind; then two broken fleets fail, exit 1, and name the
// failing rows: a namespace the hub does not let members export from (the
// ServiceExport is refused, so mcs-verify is never imported), and the only
// provider's server at zero pods (a ResourceQuota lets none start) for a
// consumer that only has remote endpoints.
func TestVerify(t *testing.T) {
	l := labtest.Get(t)
	l.Network(t)
	l.InstallCRDs(t)
	healthy, refused, empty := "mcs-verify-lab", "mcs-verify-lab-refused", "mcs-verify-lab-empty"
	ctl := l.Namespace(t, labtest.Hub)
	labtest.ClusterDNS(t, labtest.Member1, labtest.Member2)
	startLabController(t, []string{"--kubeconfig", l.KubeconfigOf(t, labtest.Hub), "--clusters-kubeconfig", l.MembersKubeconfig(t),
		"--namespace", ctl, "--watch-namespaces", strings.Join([]string{healthy, refused, empty}, ","), "--leader-elect=false", "--probe-interval", "1s"})
	members := []string{"--hub-context", labtest.Hub, "--members", "member1,member2", "-o", "json"}

	t.Run("healthy", func(t *testing.T) {
		v, err := verifyJSON(t, append(members, "-n", healthy)...)
		if err != nil {
			t.Fatalf("verify: %v; failed: %s", err, failedRows(v))
		}
		for _, want := range []string{"dns A", "dns AAAA", "dns SRV", "connect", "failover dns A", "failover connect", "failback connect", "cleanup"} {
			if !slices.ContainsFunc(v.Checks, func(c VerifyCheck) bool { return c.Check == want && c.OK }) {
				t.Errorf("no passed check %q among %d", want, len(v.Checks))
			}
		}
		// Each consumer reached both providers' pods by their own names,
		// and failed over to the other's server.
		for _, c := range []string{labtest.Member1, labtest.Member2} {
			for _, p := range []string{labtest.Member1, labtest.Member2} {
				name := serverPod + "." + p + "." + verifyHeadless + "." + healthy + ".svc.clusterset.local."
				if !hasCheck(v, c, "connect", name, p) {
					t.Errorf("%s: no connection to %s reaching %s", c, name, p)
				}
			}
			other := labtest.Member1
			if c == other {
				other = labtest.Member2
			}
			if !hasCheck(v, c, "failover connect", verifyLocal+"."+healthy+".svc.cluster.local.", other) {
				t.Errorf("%s: LocalFirst did not fail over to %s", c, other)
			}
		}
		noneLeft(t, healthy)
	})

	t.Run("export refused", func(t *testing.T) {
		l.NamedNamespace(t, refused, labtest.Hub)
		hubNS, err := l.Client(t, labtest.Hub).CoreV1().Namespaces().Get(t.Context(), refused, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		delete(hubNS.Labels, "mcs.coredns-mcs.io/exports")
		if _, err := l.Client(t, labtest.Hub).CoreV1().Namespaces().Update(t.Context(), hubNS, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		v, err := verifyJSON(t, append(members, "-n", refused, "--timeout", "20s")...)
		if !errors.Is(err, errChecksFailed) {
			t.Fatalf("verify: %v, want its checks failed", err)
		}
		for _, c := range []string{labtest.Member1, labtest.Member2} {
			if !hasFailed(v, c, "imported", refused+"/"+verifyExported, `"mcs-verify" not found`) || !hasFailed(v, c, "dns A", verifyExported+"."+refused+".svc.clusterset.local.") {
				t.Errorf("%s: the import and the name of %s did not fail: %s", c, verifyExported, failedRows(v))
			}
		}
		// The MultiClusterServices need no label: their names still pass.
		if hasFailed(v, labtest.Member2, "dns A", verifyLocal+"."+refused+".svc.cluster.local.") {
			t.Errorf("the LocalFirst name failed too: %s", failedRows(v))
		}
		if _, err := l.Client(t, labtest.Hub).CoreV1().Namespaces().Get(t.Context(), refused, metav1.GetOptions{}); err != nil {
			t.Errorf("the user's namespace on the hub: %v, want it kept", err)
		}
		noneLeft(t, refused)
	})

	t.Run("only provider at zero", func(t *testing.T) {
		l.NamedNamespace(t, empty, labtest.Member1)
		quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: empty, Name: "no-pods"},
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
		l.Apply(t, labtest.Member1, quota)
		v, err := verifyJSON(t, append(members, "-n", empty, "--providers", labtest.Member1, "--consumers", labtest.Member2, "--timeout", "15s")...)
		if !errors.Is(err, errChecksFailed) {
			t.Fatalf("verify: %v, want its checks failed", err)
		}
		// Each says why: no pod, and kube-proxy refusing a VIP without
		// endpoints.
		if !hasFailed(v, labtest.Member1, "server ready", empty+"/"+serverPod, "0 pods, want 1") ||
			!hasFailed(v, labtest.Member2, "connect", verifyExported+"."+empty+".svc.clusterset.local.", "Connection refused") {
			t.Errorf("the server and the connection did not fail, saying why: %s", failedRows(v))
		}
		noneLeft(t, empty)
	})
}

// verifyJSON runs kubectl mcs verify -o json with args.
func verifyJSON(t *testing.T, args ...string) (*Verification, error) {
	t.Helper()
	out, err := kubectlMCS(t, append([]string{"verify"}, args...)...)
	t.Logf("verify %s: %v", strings.Join(args, " "), err)
	var v Verification
	// the progress lines share the buffer with the JSON: it starts at the first {
	if i := strings.Index(out, "{"); i < 0 || json.Unmarshal([]byte(out[i:]), &v) != nil {
		t.Fatalf("verify printed no JSON (%v):\n%s", err, out)
	}
	var table strings.Builder
	if terr := v.table(&table); terr != nil {
		t.Fatal(terr)
	}
	t.Logf("as a table:\n%s", table.String())
	return &v, err
}

func hasCheck(v *Verification, cluster, check, target, got string) bool {
	return slices.ContainsFunc(v.Checks, func(c VerifyCheck) bool {
		return c.OK && c.Cluster == cluster && c.Check == check && c.Target == target && slices.Contains(c.Got, got)
	})
}

// hasFailed: v has a failed check of cluster, check and target, whose
// problem says each of why.
func hasFailed(v *Verification, cluster, check, target string, why ...string) bool {
	return slices.ContainsFunc(v.Checks, func(c VerifyCheck) bool {
		return !c.OK && c.Cluster == cluster && c.Check == check && c.Target == target &&
			!slices.ContainsFunc(why, func(w string) bool { return !strings.Contains(c.Problem, w) })
	})
}

func failedRows(v *Verification) string {
	var out []string
	for _, c := range v.Checks {
		if !c.OK {
			out = append(out, fmt.Sprintf("%s %s %s: %s", c.Cluster, c.Check, c.Target, c.Problem))
		}
	}
	return strings.Join(out, "; ")
}

// noneLeft fails unless no object of verify's label is left in any
// cluster, and its namespace is gone from the members where verify made
// it.
func noneLeft(t *testing.T, ns string) {
	t.Helper()
	l := labtest.Get(t)
	sel := verifySelector()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for _, c := range []string{labtest.Member1, labtest.Member2} {
		kube := l.Client(t, c)
		pods, err := kube.CoreV1().Pods("").List(ctx, sel)
		if err != nil || len(pods.Items) > 0 {
			t.Errorf("%s: verify's pods left: %v, %d", c, err, len(pods.Items))
		}
		nss, err := kube.CoreV1().Namespaces().List(ctx, sel)
		if err != nil || len(nss.Items) > 0 {
			t.Errorf("%s: verify's namespaces left: %v, %d", c, err, len(nss.Items))
		}
	}
	hub, err := mcsclientset.NewForConfig(l.Config(t, labtest.Hub))
	if err != nil {
		t.Fatal(err)
	}
	list, err := hub.McsV1alpha1().MultiClusterServices(ns).List(ctx, sel)
	if err != nil || len(list.Items) > 0 {
		t.Errorf("the hub: verify's MultiClusterServices left: %v, %d", err, len(list.Items))
	}
}
