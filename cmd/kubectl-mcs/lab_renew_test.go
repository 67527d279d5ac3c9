//go:build lab

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// A running mcs-controller renews member3's token at its renewal point and
// writes it into the Secret, takes a token that join wrote after the old
// ServiceAccount was deleted (a revoked leak) and a join after an unjoin up
// without a restart; while the credentials change, member3 stays
// registered and the slice it imports of its own exported service is never
// deleted (only unjoin, which retires it, cleans it).
func TestControllerRenewsCredentials(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ctl := l.Namespace(t, labtest.Hub) // the controller's namespace on the hub
	apps := l.Namespace(t, labtest.Hub, labtest.Member3)
	l.Workload(t, labtest.Member3, apps, "foo", 1, false)
	l.Apply(t, labtest.Member3, labtest.ServiceExport(apps, "foo"))
	join := []string{"join", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ctl}
	// 10 minutes, the API server's least; renewed 8 minutes before it
	// expires, two minutes from now, once foo is imported (a lead within
	// nine tenths of the token's lifetime is kept: credentials.RenewAt).
	if out, err := kubectlMCS(t, append(join, "--duration", "10m")...); err != nil {
		t.Fatalf("join: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		// The controller has stopped by then: nothing to wait for.
		_, _ = kubectlMCS(t, "unjoin", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ctl, "--timeout", "0s")
	})
	first := memberToken(t, ctl)
	deletes := watchImportedDeletes(t, apps)

	_, addr := labtest.StartController(t, l.Binary(t, "mcs-controller"),
		"--kubeconfig", l.KubeconfigOf(t, labtest.Hub), "--namespace", ctl, "--watch-namespaces", apps, "--leader-elect=false",
		"--probe-interval", "1s", "--renew-credentials-before", "8m")
	imported(t, apps)

	labtest.Eventually(t, 3*time.Minute, func(context.Context) error {
		if memberToken(t, ctl) == first {
			return fmt.Errorf("the Secret still holds join's token")
		}
		return nil
	})
	if who := whoAmI(t, memberToken(t, ctl)); who != "system:serviceaccount:mcs-system:mcs-member" {
		t.Errorf("the renewed token authenticates as %q, want the controller's ServiceAccount", who)
	}
	renewedExpiry(t, addr, 29*24*time.Hour)
	reachable(t, addr, 1)
	imported(t, apps)

	// A leaked token revoked: its ServiceAccount deleted, then join again.
	if err := l.Client(t, labtest.Member3).CoreV1().ServiceAccounts("mcs-system").Delete(t.Context(), "mcs-member", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reachable(t, addr, 0)
	if out, err := kubectlMCS(t, join...); err != nil {
		t.Fatalf("join after the ServiceAccount was deleted: %v\n%s", err, out)
	}
	reachable(t, addr, 1)
	imported(t, apps)
	if n := deletes(); n > 0 {
		t.Errorf("%d imported EndpointSlices deleted while the credentials changed, want none", n)
	}

	// unjoin retires member3 (cleaning what the controller wrote there);
	// join registers it again, without a restart.
	if out, err := kubectlMCS(t, "unjoin", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ctl); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, out)
	}
	if out, err := kubectlMCS(t, join...); err != nil {
		t.Fatalf("join after unjoin: %v\n%s", err, out)
	}
	reachable(t, addr, 1)
	imported(t, apps)

	var fleet FleetReport
	if text, err := kubectlMCS(t, "status", "--hub-context", labtest.Hub, "--controller-namespace", ctl, "-o", "json"); err != nil || json.Unmarshal([]byte(text), &fleet) != nil || len(fleet.Members) != 1 || fleet.Members[0].Credentials == nil || fleet.Members[0].Credentials.Expires == "" {
		t.Errorf("kubectl mcs status: %v, members %+v, want member3 with its credentials' expiry\n%s", err, fleet.Members, text)
	}
}

// watchImportedDeletes counts the deletions of imported slices in member3's
// namespace apps from now on.
func watchImportedDeletes(t *testing.T, apps string) func() int {
	t.Helper()
	w, err := labtest.Get(t).Client(t, labtest.Member3).DiscoveryV1().EndpointSlices(apps).Watch(t.Context(), metav1.ListOptions{LabelSelector: mcsv1b1.LabelSourceCluster})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	deleted := make(chan string, 100)
	go func() {
		for e := range w.ResultChan() {
			if s, ok := e.Object.(*discoveryv1.EndpointSlice); ok && e.Type == watch.Deleted {
				deleted <- s.Name
			}
		}
	}()
	return func() int { return len(deleted) }
}

// imported waits until member3 holds the slice imported of its own foo.
func imported(t *testing.T, apps string) {
	t.Helper()
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		list, err := labtest.Get(t).Client(t, labtest.Member3).DiscoveryV1().EndpointSlices(apps).List(ctx, metav1.ListOptions{LabelSelector: mcsv1b1.LabelSourceCluster + "=" + labtest.Member3})
		if err != nil || len(list.Items) == 0 {
			return fmt.Errorf("imported slices of foo in member3: %v, %d", err, len(list.Items))
		}
		return nil
	})
}

// reachable waits until mcs_member_reachable{cluster="member3"} is want.
func reachable(t *testing.T, addr string, want float64) {
	t.Helper()
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		got, err := member3Metric(ctx, addr, "mcs_member_reachable")
		if err != nil || got != want {
			return fmt.Errorf("mcs_member_reachable{cluster=member3} = %v (%v), want %v", got, err, want)
		}
		return nil
	})
}

// renewedExpiry waits until member3's credentials expire at least least
// from now, as the controller exports it.
func renewedExpiry(t *testing.T, addr string, least time.Duration) {
	t.Helper()
	labtest.Eventually(t, time.Minute, func(ctx context.Context) error {
		got, err := member3Metric(ctx, addr, "mcs_member_credential_expiry_timestamp_seconds")
		if want := time.Now().Add(least); err != nil || time.Unix(int64(got), 0).Before(want) {
			return fmt.Errorf("mcs_member_credential_expiry_timestamp_seconds{cluster=member3} = %v (%v), want after %s", got, err, want)
		}
		return nil
	})
}

func member3Metric(ctx context.Context, addr, name string) (float64, error) {
	families, err := process.Scrape(ctx, "http://"+addr+"/metrics")
	if err != nil {
		return 0, err
	}
	for _, m := range families[name].GetMetric() {
		if m.GetLabel()[0].GetValue() == labtest.Member3 {
			return m.GetGauge().GetValue(), nil
		}
	}
	return 0, fmt.Errorf("no %s of member3", name)
}
