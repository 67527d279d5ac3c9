//go:build lab

package controller_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

const (
	m1 = labtest.Member1
	m2 = labtest.Member2
	m3 = labtest.Member3
)

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

func deleteNamespace(t *testing.T, cluster, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := labtest.Get(t).Client(t, cluster).CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("deleting namespace %s in %s: %v", ns, cluster, err)
	}
}

// Members registered by Secrets in the controller's namespace on the hub,
// at run time: foo reaches member2 through them. A Secret whose kubeconfig
// is broken registers a member that every condition naming it reports, with
// the Secret and the cause, while other services sync.
func TestSecretMembers(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub, m1, m2)
	start(t, "", ns)
	workload(t, m1, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub,
		labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}),
		labtest.MultiClusterService(ns, "bar", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{"member9"}))
	for _, c := range []string{m1, m2} {
		register(t, ns, c, l.KubeconfigOf(t, c))
	}
	l.Apply(t, labtest.Hub, memberSecret(ns, "member9", []byte("clusters: [not a kubeconfig")))

	labtest.Eventually(t, wait, func(ctx context.Context) error {
		if err := importsFrom(ctx, t, m1, 1, ns, "foo", m2); err != nil {
			return err
		}
		if _, err := conditionsAre(ctx, t, ns, "foo", allTrue); err != nil {
			return fmt.Errorf("foo: %w", err)
		}
		m, err := getMCS(ctx, t, ns, "bar")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceApplied)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ClusterUnreachable" || !contains(c.Message, "member9", "secret "+ns+"/member9", "kubeconfig") {
			return fmt.Errorf("bar's EndpointSliceApplied is %+v, want ClusterUnreachable naming member9, its Secret and the kubeconfig", c)
		}
		return nil
	})
}

// register registers cluster with the kubeconfig file as a Secret in the
// controller's namespace ns on the hub.
func register(t *testing.T, ns, cluster, kubeconfig string) {
	t.Helper()
	data, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	labtest.Get(t).Apply(t, labtest.Hub, memberSecret(ns, cluster, data))
}

// memberSecret registers cluster with its kubeconfig, as an operator does.
func memberSecret(ns, cluster string, kubeconfig []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: ns, Labels: map[string]string{api.LabelCluster: cluster}},
		Data:       map[string][]byte{api.KeyKubeconfig: kubeconfig},
	}
}

// A member whose credentials may not write in one namespace: that
// namespace's service reports the forbidden error with the cluster and the
// namespace, and the other namespace's service syncs.
func TestForbiddenNamespace(t *testing.T) {
	l := labtest.Get(t)
	allowed, denied := l.Namespace(t), l.Namespace(t)
	writerIn(t, m2, allowed, "mcs-controller")
	start(t, "", allowed, denied)
	register(t, allowed, m1, l.KubeconfigOf(t, m1))
	register(t, allowed, m2, l.TokenKubeconfig(t, m2, allowed, "mcs-controller"))
	for _, ns := range []string{allowed, denied} {
		workload(t, m1, ns, "foo", 1, false)
		l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
	}

	labtest.Eventually(t, wait, func(ctx context.Context) error {
		if err := importsFrom(ctx, t, m1, 1, allowed, "foo", m2); err != nil {
			return err
		}
		if _, err := conditionsAre(ctx, t, allowed, "foo", allTrue); err != nil {
			return fmt.Errorf("%s/foo: %w", allowed, err)
		}
		m, err := getMCS(ctx, t, denied, "foo")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceApplied)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ApplyFailed" || !contains(c.Message, m2+": ", "forbidden", denied) {
			return fmt.Errorf("%s/foo's EndpointSliceApplied is %+v, want ApplyFailed naming member2, forbidden and the namespace", denied, c)
		}
		return nil
	})
}

// writerIn makes ServiceAccount ns/name in cluster, which may read what
// mcs-controller watches everywhere and renew its Leases, but write the
// objects of a service only in namespace ns.
func writerIn(t *testing.T, cluster, ns, name string) {
	t.Helper()
	l := labtest.Get(t)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}
	read := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{mcsv1b1.GroupName}, Resources: []string{"serviceexports", "serviceimports"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		},
	}
	write := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"create", "update", "delete"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"create", "update", "delete"}},
			{APIGroups: []string{mcsv1b1.GroupName}, Resources: []string{"serviceimports", "serviceimports/status"}, Verbs: []string{"create", "update", "delete"}},
		},
	}
	l.Apply(t, cluster,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}},
		read,
		&rbacv1.ClusterRoleBinding{ObjectMeta: read.ObjectMeta, Subjects: subject, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: read.Name}},
		write,
		&rbacv1.RoleBinding{ObjectMeta: write.ObjectMeta, Subjects: subject, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: write.Name}},
	)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rbac := l.Client(t, cluster).RbacV1()
		if err := rbac.ClusterRoleBindings().Delete(ctx, read.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting ClusterRoleBinding %s: %v", read.Name, err)
		}
		if err := rbac.ClusterRoles().Delete(ctx, read.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting ClusterRole %s: %v", read.Name, err)
		}
	})
}

// Members come and go at run time: member3, registered by a Secret, provides
// and consumes foo within seconds; member1, deregistered while reachable,
// is cleaned of what the controller wrote there and its endpoints leave the
// other consumers, while its own Service stays as it is.
func TestMembersComeAndGo(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	start(t, "", ns)
	register(t, ns, m1, l.KubeconfigOf(t, m1))
	register(t, ns, m2, l.KubeconfigOf(t, m2))
	workload(t, m1, ns, "foo", 1, false)
	workload(t, m3, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, nil, nil))
	imports := func(want map[string]map[string][]string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			for c, w := range want {
				if err := sameImports(ctx, t, c, ns, "foo", w); err != nil {
					return err
				}
			}
			return nil
		}
	}
	ips1, ips3 := readyIPsNow(t, m1, ns, "foo", 1), readyIPsNow(t, m3, ns, "foo", 1)
	labtest.Eventually(t, wait, imports(map[string]map[string][]string{m1: {m1: ips1}, m2: {m1: ips1}, m3: {}}))

	register(t, ns, m3, l.KubeconfigOf(t, m3))
	both := map[string][]string{m1: ips1, m3: ips3}
	labtest.Eventually(t, wait, imports(map[string]map[string][]string{m1: both, m2: both, m3: both}))

	own, err := l.Client(t, m1).CoreV1().Services(ns).Get(t.Context(), "foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Client(t, labtest.Hub).CoreV1().Secrets(ns).Delete(t.Context(), m1, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		if err := imports(map[string]map[string][]string{m2: {m3: ips3}, m3: {m3: ips3}})(ctx); err != nil {
			return err
		}
		return absent(ctx, t, m1, ns, "foo")
	})
	after, err := l.Client(t, m1).CoreV1().Services(ns).Get(t.Context(), "foo", metav1.GetOptions{})
	if err != nil || after.ResourceVersion != own.ResourceVersion {
		t.Errorf("member1's own Service foo: %v, resourceVersion %s → %s; want it untouched", err, own.ResourceVersion, after.ResourceVersion)
	}
}

// A member deregistered while a MultiClusterService names it: it is
// cleaned and retires, the condition names it, and the other clusters
// keep being served (a change in member3 still reaches member2).
func TestDeregisteredMemberInSpec(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	start(t, "", ns)
	for _, c := range []string{m1, m2, m3} {
		register(t, ns, c, l.KubeconfigOf(t, c))
	}
	workload(t, m3, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m3}, []v1alpha1.ClusterName{m1, m2}))
	ips := readyIPsNow(t, m3, ns, "foo", 1)
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		for _, c := range []string{m1, m2} {
			if err := sameImports(ctx, t, c, ns, "foo", map[string][]string{m3: ips}); err != nil {
				return err
			}
		}
		return nil
	})

	if err := l.Client(t, labtest.Hub).CoreV1().Secrets(ns).Delete(t.Context(), m1, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	workload(t, m3, ns, "foo", 2, false)
	ips = readyIPsNow(t, m3, ns, "foo", 2)
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		if err := sameImports(ctx, t, m2, ns, "foo", map[string][]string{m3: ips}); err != nil {
			return err
		}
		if err := absent(ctx, t, m1, ns, "foo"); err != nil {
			return err
		}
		m, err := getMCS(ctx, t, ns, "foo")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceApplied)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "ClusterLeft" || !contains(c.Message, "spec.serviceConsumptionClusters names member1") {
			return fmt.Errorf("EndpointSliceApplied is %+v, want ClusterLeft naming member1", c)
		}
		return nil
	})
}

// readyIPsNow waits until cluster runs want ready pods of app name.
func readyIPsNow(t *testing.T, cluster, ns, name string, want int) []string {
	t.Helper()
	var ips []string
	labtest.Eventually(t, wait, func(ctx context.Context) (err error) {
		ips, err = readyIPs(ctx, t, cluster, ns, name, want)
		return err
	})
	return ips
}

// Source slices of odd content: empty, IPv6, without ports, and 1,200
// endpoints across three slices are imported as they are; an FQDN slice is
// skipped and the condition says which and why.
func TestOddSlices(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub, m1, m2)
	run(t, ns)
	svc := labtest.Service(ns, "odd", false)
	svc.Spec.Selector = nil // its slices are the test's
	port := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(labtest.PodPort)), Protocol: ptr.To(corev1.ProtocolTCP)}}
	odd := []*discoveryv1.EndpointSlice{
		sourceSlice(ns, "odd", "empty", discoveryv1.AddressTypeIPv4, port),
		sourceSlice(ns, "odd", "v6", discoveryv1.AddressTypeIPv6, port, "fd00:10::1", "fd00:10::2"),
		sourceSlice(ns, "odd", "noports", discoveryv1.AddressTypeIPv4, nil, "10.10.200.1"),
		sourceSlice(ns, "odd", "fqdn", discoveryv1.AddressTypeFQDN, port, "db.example.org"),
	}
	for i := range 3 {
		var addrs []string
		for j := range 400 {
			addrs = append(addrs, fmt.Sprintf("10.10.%d.%d", 201+2*i+j/250, j%250+1))
		}
		odd = append(odd, sourceSlice(ns, "odd", fmt.Sprintf("many-%d", i), discoveryv1.AddressTypeIPv4, port, addrs...))
	}
	objs := []runtime.Object{svc}
	for _, s := range odd {
		objs = append(objs, s)
	}
	l.Apply(t, m1, objs...)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "odd", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))

	labtest.Eventually(t, wait, func(ctx context.Context) error {
		list, err := l.Client(t, m2).DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: mcsv1b1.LabelServiceName + "=odd"})
		if err != nil {
			return err
		}
		got := map[string]int{}
		for _, s := range list.Items {
			got[s.Name] = len(s.Endpoints)
		}
		want := map[string]int{}
		for _, s := range odd {
			if s.AddressType != discoveryv1.AddressTypeFQDN {
				want["imported-"+m1+"-"+s.Name] = len(s.Endpoints)
			}
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("member2's imported slices (endpoints each) %v, want %v", got, want)
		}
		m, err := conditionsAre(ctx, t, ns, "odd", allTrue)
		if err != nil {
			return err
		}
		if c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceCollected); !contains(c.Message, "fqdn", "FQDN") {
			return fmt.Errorf("EndpointSliceCollected says %q, want the FQDN slice named as skipped", c.Message)
		}
		return nil
	})
}

// sourceSlice is a slice of Service svc, as an EndpointSlice controller of
// another kind than kube-controller-manager's might write it.
func sourceSlice(ns, svc, name string, typ discoveryv1.AddressType, ports []discoveryv1.EndpointPort, addrs ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "lab-test",
		}},
		AddressType: typ,
		Ports:       ports,
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return s
}

// A user's EndpointSlice with the name an imported slice would have: it is
// left as it is, named in EndpointSliceApplied and a Warning Event, and the
// service's other slice, its ServiceImport and derived Service are synced.
func TestUsersSliceInTheWay(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub, m1, m2)
	run(t, ns)
	svc := labtest.Service(ns, "foo", false)
	svc.Spec.Selector = nil
	port := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(labtest.PodPort)), Protocol: ptr.To(corev1.ProtocolTCP)}}
	l.Apply(t, m1, svc,
		sourceSlice(ns, "foo", "a", discoveryv1.AddressTypeIPv4, port, "10.10.210.1"),
		sourceSlice(ns, "foo", "b", discoveryv1.AddressTypeIPv4, port, "10.10.210.2"))
	mine := sourceSlice(ns, "mine", "imported-"+m1+"-a", discoveryv1.AddressTypeIPv4, port, "10.12.210.1")
	l.Apply(t, m2, mine)
	before, err := l.Client(t, m2).DiscoveryV1().EndpointSlices(ns).Get(t.Context(), mine.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))

	labtest.Eventually(t, wait, func(ctx context.Context) error {
		if err := sameImports(ctx, t, m2, ns, "foo", map[string][]string{m1: {"10.10.210.2"}}); err != nil {
			return err
		}
		if _, err := l.Client(t, m2).CoreV1().Services(ns).Get(ctx, api.DerivedPrefix+"foo", metav1.GetOptions{}); err != nil {
			return err
		}
		m, err := getMCS(ctx, t, ns, "foo")
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.EndpointSliceApplied)
		if c == nil || c.Status != metav1.ConditionFalse || !contains(c.Message, m2+": ", mine.Name, "not managed") {
			return fmt.Errorf("EndpointSliceApplied is %+v, want False naming member2 and %s", c, mine.Name)
		}
		events, err := l.Client(t, labtest.Hub).CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=foo,type=Warning"})
		if err != nil || len(events.Items) == 0 {
			return fmt.Errorf("no Warning event for foo: %v", err)
		}
		return nil
	})
	after, err := l.Client(t, m2).DiscoveryV1().EndpointSlices(ns).Get(t.Context(), mine.Name, metav1.GetOptions{})
	if err != nil || after.ResourceVersion != before.ResourceVersion {
		t.Errorf("the user's EndpointSlice %s: %v, resourceVersion %s → %s; want it untouched", mine.Name, err, before.ResourceVersion, after.ResourceVersion)
	}
}
