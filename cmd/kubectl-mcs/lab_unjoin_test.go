//go:build lab

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// unjoin of a member that imports (member3, importing member1's foo)
// ends with none of the controller's objects left there and no Lease
// source-member3 in member1; unjoin with the hub's context as the
// member's refuses, and changes nothing.
func TestUnjoinLeavesNothing(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ctl := l.Namespace(t, labtest.Hub)
	apps := l.Namespace(t, labtest.Hub, labtest.Member1, labtest.Member3)
	l.Workload(t, labtest.Member1, apps, "foo", 1, false)
	l.Apply(t, labtest.Member1, labtest.ServiceExport(apps, "foo"))
	for _, m := range []string{labtest.Member1, labtest.Member3} {
		if out, err := kubectlMCS(t, "join", m, "--context", m, "--hub-context", labtest.Hub, "--controller-namespace", ctl); err != nil {
			t.Fatalf("join %s: %v\n%s", m, err, out)
		}
	}
	labtest.StartController(t, l.Binary(t, "mcs-controller"), "--kubeconfig", l.KubeconfigOf(t, labtest.Hub),
		"--namespace", ctl, "--watch-namespaces", apps, "--leader-elect=false", "--probe-interval", "1s")
	t.Cleanup(func() { // before the controller stops: it cleans member1
		_, _ = kubectlMCS(t, "unjoin", labtest.Member1, "--context", labtest.Member1, "--hub-context", labtest.Hub, "--controller-namespace", ctl)
	})
	labtest.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		if left := controllerObjects(ctx, t, labtest.Member3); len(left) < 4 { // slice, import, derived-foo, Leases
			return fmt.Errorf("member3 holds %v of the controller's, want foo imported and the Leases", left)
		}
		return sourceLease(ctx, t, labtest.Member1)
	})

	out, err := kubectlMCS(t, "unjoin", labtest.Member3, "--context", labtest.Hub, "--hub-context", labtest.Hub, "--controller-namespace", ctl)
	if err == nil || !strings.Contains(err.Error(), `context "hub" reaches the hub's API server`) {
		t.Fatalf("unjoin with the hub as the member: %v, want refused\n%s", err, out)
	}
	if _, err := l.Client(t, labtest.Hub).CoreV1().Secrets(ctl).Get(t.Context(), labtest.Member3, metav1.GetOptions{}); err != nil {
		t.Errorf("member3's Secret after the refused unjoin: %v, want it kept", err)
	}
	if err := sourceLease(t.Context(), t, labtest.Member1); err != nil {
		t.Errorf("after the refused unjoin: %v", err)
	}

	out, err = kubectlMCS(t, "unjoin", labtest.Member3, "--member-context", "member3=member3", "--hub-context", labtest.Hub, "--controller-namespace", ctl)
	if err != nil {
		t.Fatalf("unjoin: %v\n%s", err, out)
	}
	t.Logf("unjoin said: %s", out)
	if left := controllerObjects(t.Context(), t, labtest.Member3); len(left) > 0 {
		t.Errorf("member3 holds %v of the controller's after unjoin, want nothing", left)
	}
	if err := sourceLease(t.Context(), t, labtest.Member1); !apierrors.IsNotFound(err) {
		t.Errorf("member1's Lease source-member3 after unjoin: %v, want it gone", err)
	}
	if _, err := l.Client(t, labtest.Member3).CoreV1().ServiceAccounts("mcs-system").Get(t.Context(), "mcs-member", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("member3's ServiceAccount mcs-member after unjoin: %v, want it gone", err)
	}
}

// controllerObjects names what cluster holds of the controller's, in every
// namespace: imported slices, Services and ServiceImports with its label,
// and its Leases source-*.
func controllerObjects(ctx context.Context, t *testing.T, cluster string) []string {
	t.Helper()
	l := labtest.Get(t)
	kube := l.Client(t, cluster)
	ours := metav1.ListOptions{LabelSelector: api.LabelManagedBy + "=" + api.ManagedBy}
	var out []string
	slices, err := kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + api.ManagedBy})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		out = append(out, "EndpointSlice "+s.Namespace+"/"+s.Name)
	}
	services, err := kube.CoreV1().Services("").List(ctx, ours)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range services.Items {
		out = append(out, "Service "+s.Namespace+"/"+s.Name)
	}
	imports, err := l.Dynamic(t, cluster).Resource(mcsv1b1.SchemeGroupVersion.WithResource("serviceimports")).List(ctx, ours)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range imports.Items {
		out = append(out, "ServiceImport "+i.GetNamespace()+"/"+i.GetName())
	}
	leases, err := kube.CoordinationV1().Leases(api.LeaseNamespace).List(ctx, ours)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range leases.Items {
		if strings.HasPrefix(s.Name, api.LeasePrefix) {
			out = append(out, "Lease "+s.Name)
		}
	}
	return out
}

// sourceLease is nil when cluster holds the controller's Lease
// source-member3, and the API server's error when it holds none.
func sourceLease(ctx context.Context, t *testing.T, cluster string) error {
	t.Helper()
	l, err := labtest.Get(t).Client(t, cluster).CoordinationV1().Leases(api.LeaseNamespace).Get(ctx, api.LeasePrefix+labtest.Member3, metav1.GetOptions{})
	if err == nil && l.Labels[api.LabelManagedBy] != api.ManagedBy {
		return fmt.Errorf("%s's Lease %s is not the controller's: %v", cluster, l.Name, l.Labels)
	}
	return err
}
