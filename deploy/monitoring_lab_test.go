//go:build lab

package deploy_test

import (
	"context"
	"encoding/base64"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// The hub's alerts and the dashboard's mcs-controller panels use only
// metrics mcs-controller exports. bin/mcs-controller runs against the lab
// (leader election on the hub, the members from --clusters-kubeconfig),
// refuses a member Secret and syncs a MultiClusterService from member1 into
// member2, so that its labelled families have series: members reachable and
// their objects, writes, syncs, slices written per member, refusals, the
// work queue, leader election, API requests. Its /metrics is read every
// second until every name the queries use is there, or the wait ends.
func TestHubAlertsAndPanelsUseControllerMetrics(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ns := l.Namespace(t, hub)
	apps := l.Namespace(t, hub, m1, m2)
	l.Apply(t, hub, refusedSecret(ns), expiringSecret(ns))
	_, addr := labtest.StartController(t, l.Binary(t, "mcs-controller"), "--kubeconfig", l.KubeconfigOf(t, hub),
		"--clusters-kubeconfig", l.MembersKubeconfig(t), "--namespace", ns, "--watch-namespaces", apps,
		"--leader-elect=true", "--probe-interval", "1s")
	l.Workload(t, m1, apps, "foo", 1, false)
	l.ApplyMultiClusterService(t, labtest.MultiClusterService(apps, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
	// Before foo's deletion at the end: the controller keeps a deleted
	// service's finalizer while a registered member, the refused one
	// too, cannot be cleaned.
	t.Cleanup(func() {
		for _, name := range []string{"refused", "expiring"} {
			_ = l.Client(t, hub).CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{})
		}
	})
	l.ClusterIP(t, m2, apps, api.DerivedPrefix+"foo", converge)

	queries := append(ruleQueries(hubAlerts.rules(t)), dashboardQueries(renderedDashboard(t), "mcs-controller")...)
	var problems []string
	for end := time.Now().Add(converge); ; time.Sleep(time.Second) {
		families, err := process.Scrape(t.Context(), "http://"+addr+"/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if problems = unexported(queries, exportedNames(families)); len(problems) == 0 || time.Now().After(end) {
			break
		}
	}
	for _, p := range problems {
		t.Errorf("mcs-controller: %s", p)
	}
}

// refusedSecret is a member Secret in namespace ns that the controller
// refuses: its cluster label is no DNS label.
func refusedSecret(ns string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: ns, Labels: map[string]string{api.LabelCluster: "Not_A_Name"}},
		Data:       map[string][]byte{api.KeyKubeconfig: []byte("{}")},
	}
}

// expiringSecret registers, in namespace ns, a member nobody reaches whose
// token says when it expires, so that the controller exports that expiry;
// the token is of the member account, so the replica that renews tokens
// exports when it will renew this one too: in 2099, so no renewal is tried.
func expiringSecret(ns string) *corev1.Secret {
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"` + credentials.Subject + `","iat":1795000000,"exp":4102444800}`))
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"https://127.0.0.1:1\"}}]\n" +
		"users: [{name: u, user: {token: a." + claims + ".c}}]\ncontexts: [{name: expiring, context: {cluster: c, user: u}}]\n"
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "expiring", Namespace: ns, Labels: map[string]string{api.LabelCluster: "expiring"}},
		Data:       map[string][]byte{api.KeyKubeconfig: []byte(kubeconfig)},
	}
}
