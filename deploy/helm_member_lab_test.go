//go:build lab

package deploy_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"helm.sh/helm/v3/pkg/action"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labnet"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// The CoreDNS project's chart, installed on member1 with the members'
// values by Helm's SDK as helm install does, runs coredns-mcs (the lab's
// kubelet runs the image's binary, bin/coredns-mcs) and answers through
// its Service, at the ClusterIP member1 gave it, over UDP and TCP: an
// imported service's clusterset.local name and its native name (mcs's
// answers), and an ordinary one (the kubernetes plugin's). The release
// goes into a namespace of the test's own, under its own name, so that
// member1's kube-system CoreDNS, which other tests use, is left alone; the
// Role coredns-mcs that docs/install.md applies beside the chart binds the
// release's account instead of kube-system's.
func TestCoreDNSChartAnswersOnAMember(t *testing.T) {
	l := labtest.Get(t)
	l.Network(t)
	l.Binary(t, "coredns-mcs")
	ns := l.Namespace(t, m1)
	bindLeaseReader(t, ns)

	cfg := helmConfig(t, m1, ns)
	t.Cleanup(func() { uninstallQuietly(t, cfg, ns) })
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Timeout = ns, ns, time.Minute
	rel, err := install.RunWithContext(t.Context(), loadCoreDNSChart(t), memberValues(t))
	if err != nil {
		t.Fatalf("helm install of the CoreDNS chart with %s: %v", memberValuesFile, err)
	}
	t.Logf("installed %v", keys(decodeManifests(t, rel.Manifest)))

	const vip = "10.99.0.7"
	imp := &mcsv1beta1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "foo", Annotations: map[string]string{api.AnnotationStrategy: string(api.RemoteAndLocal)}},
		Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: []string{vip},
			Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	l.Apply(t, m1, imp)
	kubernetesIP := l.ClusterIP(t, m1, "default", "kubernetes", time.Minute)
	dnsIP := l.ClusterIP(t, m1, ns, "kube-dns", time.Minute)
	labtest.Eventually(t, 2*time.Minute, func(ctx context.Context) error {
		if n, err := l.CoreDNSReady(ctx, t, m1, ns, "app.kubernetes.io/instance="+ns); err != nil || n != 2 {
			return fmt.Errorf("%d CoreDNS pods ready (%v), want the values' 2", n, err)
		}
		return nil
	})
	for _, proto := range []string{"udp", "tcp"} {
		for name, want := range map[string]string{
			"foo." + ns + ".svc.clusterset.local.":  vip,
			"foo." + ns + ".svc.cluster.local.":     vip,
			"kubernetes.default.svc.cluster.local.": kubernetesIP,
		} {
			labtest.Eventually(t, converge, func(ctx context.Context) error { return answersA(ctx, proto, dnsIP, name, want) })
		}
	}

	if _, err := action.NewUninstall(cfg).Run(ns); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
}

// bindLeaseReader binds the Role coredns-mcs of deploy/member (the Leases
// of mcs-system, which mcs reads) to the account coredns in ns, the
// release's, under names of the test's own, and deletes the two when the
// test ends: mcs-system is shared.
func bindLeaseReader(t *testing.T, ns string) {
	t.Helper()
	l := labtest.Get(t)
	role := typed[rbacv1.Role](t, render(t, "overlays/member1"), "Role", "coredns-mcs")
	role.ObjectMeta = metav1.ObjectMeta{Namespace: role.Namespace, Name: ns + "-coredns-mcs"}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: role.Namespace, Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "coredns"}},
	}
	l.Apply(t, m1, role, binding)
	rbac := l.Client(t, m1).RbacV1()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, err := range []error{
			rbac.RoleBindings(role.Namespace).Delete(ctx, binding.Name, metav1.DeleteOptions{}),
			rbac.Roles(role.Namespace).Delete(ctx, role.Name, metav1.DeleteOptions{}),
		} {
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting the test's lease reader in %s: %v", role.Namespace, err)
			}
		}
	})
}

// answersA asks the DNS server at ip:53 for name's A records over proto
// (udp or tcp) from member1's node, through its kube-proxy, and fails
// unless the answer is exactly want.
func answersA(ctx context.Context, proto, ip, name, want string) error {
	conn, err := labnet.Node(m1).Dial(ctx, proto, net.JoinHostPort(ip, "53"))
	if err != nil {
		return fmt.Errorf("%s over %s: %w", name, proto, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	c := &dns.Conn{Conn: conn}
	if err := c.WriteMsg(new(dns.Msg).SetQuestion(name, dns.TypeA)); err != nil {
		return fmt.Errorf("%s over %s: %w", name, proto, err)
	}
	r, err := c.ReadMsg()
	if err != nil {
		return fmt.Errorf("%s over %s: %w", name, proto, err)
	}
	var got []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			got = append(got, a.A.String())
		}
	}
	if !slices.Equal(got, []string{want}) {
		return fmt.Errorf("%s A over %s: %s %v, want %s", name, proto, dns.RcodeToString[r.Rcode], got, want)
	}
	return nil
}
