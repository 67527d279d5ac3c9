//go:build lab

package deploy_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

const (
	hub = labtest.Hub
	m1  = labtest.Member1
	m2  = labtest.Member2
	// converge bounds the wait for the controller and DNS to follow a
	// change: seconds in practice, more under -race on a busy machine.
	converge = 60 * time.Second
)

// mcs-controller and member2's coredns-mcs, run as the ServiceAccounts of
// the overlays with exactly their RBAC rules, sync a MultiClusterService
// and a ServiceExport from member1 and answer both in DNS; the same tokens
// are refused everything else the roles do not grant.
func TestRunsUnderTheDeployedRBAC(t *testing.T) {
	l := labtest.Get(t)
	l.InstallCRDs(t)
	ns := l.Namespace(t, hub, m1, m2)
	// The overlays' RBAC, renamed so that it clashes with nothing: every
	// name gets the test's namespace as a prefix, and the ServiceAccounts
	// (on the hub, every namespaced object: the controller's namespace is
	// the test's) move into the test's namespace.
	deployRBAC(t, hub, "overlays/hub", ns, true)
	deployRBAC(t, m1, "overlays/member1", ns, false)
	deployRBAC(t, m2, "overlays/member2", ns, false)
	account := func(name string) string { return ns + "-" + name }
	// The members' admission policy is in force before the controller
	// writes: every write below passes it.
	m1Token, m2Token := l.TokenKubeconfig(t, m1, ns, account("mcs-member")), l.TokenKubeconfig(t, m2, ns, account("mcs-member"))
	policyInForce(t, m1Token, m1, ns)
	policyInForce(t, m2Token, m2, ns)

	registerMembers(t, ns, map[string]string{m1: m1Token, m2: m2Token})
	// The services live in a namespace of their own, as users' do: the
	// controller never exports a service of its own namespace.
	apps := l.Namespace(t, hub, m1, m2)
	hubToken := l.TokenKubeconfig(t, hub, ns, account("mcs-controller"))
	startController(t, hubToken, ns, apps)
	dnsToken := l.TokenKubeconfig(t, m2, ns, account("coredns"))
	server := labtest.StartMemberDNS(t, l.Binary(t, "coredns-mcs"), dnsToken, m2, converge)

	l.Workload(t, m1, apps, "foo", 1, false)
	l.Apply(t, hub, labtest.MultiClusterService(apps, "foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
	l.Workload(t, m1, apps, "bar", 1, false)
	l.Apply(t, m1, labtest.ServiceExport(apps, "bar"))

	expectA(t, server, fmt.Sprintf("foo.%s.svc.cluster.local.", apps), l.ClusterIP(t, m2, apps, api.DerivedPrefix+"foo", converge))
	expectA(t, server, fmt.Sprintf("bar.%s.svc.clusterset.local.", apps), l.ClusterIP(t, m2, apps, api.DerivedPrefix+"bar", converge))
	expectSynced(t, apps)

	denied(t, hubToken, hub, ns, []authorizationv1.ResourceAttributes{
		{Verb: "list", Resource: "secrets", Namespace: "kube-system"},
		{Verb: "create", Resource: "secrets", Namespace: ns},
		{Verb: "delete", Group: api.GroupName, Resource: "multiclusterservices", Namespace: ns},
		{Verb: "create", Group: api.GroupName, Resource: "multiclusterservices", Namespace: ns},
		{Verb: "create", Resource: "services", Namespace: ns},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: ns, Name: "other"},
		{Verb: "get", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system", Name: "mcs-controller"},
		{Verb: "delete", Resource: "pods", Namespace: ns},
	})
	memberDenied := []authorizationv1.ResourceAttributes{
		{Verb: "get", Resource: "secrets", Namespace: ns},
		{Verb: "list", Resource: "secrets", Namespace: "mcs-system"},
		{Verb: "delete", Resource: "pods", Namespace: ns},
		{Verb: "create", Resource: "configmaps", Namespace: ns},
		{Verb: "update", Resource: "namespaces", Name: ns},
		{Verb: "create", Resource: "namespaces"}, // kubectl mcs join --create-namespaces grants it
		{Verb: "delete", Resource: "namespaces", Name: ns},
		{Verb: "create", Group: mcsv1beta1.GroupName, Resource: "serviceexports", Namespace: ns},
		{Verb: "delete", Group: mcsv1beta1.GroupName, Resource: "serviceexports", Namespace: ns},
		{Verb: "update", Group: "coordination.k8s.io", Resource: "leases", Namespace: "kube-system"},
		{Verb: "update", Group: "apps", Resource: "deployments", Namespace: ns},
	}
	denied(t, m1Token, m1, ns, memberDenied)
	refusedByPolicy(t, m1Token, m1, apps)
	writesOnlyItsOwn(t, m1Token, m1, ns, apps)
	var writes []authorizationv1.ResourceAttributes
	for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
		for _, r := range []authorizationv1.ResourceAttributes{
			{Resource: "services", Namespace: ns},
			{Resource: "namespaces"},
			{Resource: "pods", Namespace: ns},
			{Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: ns},
			{Group: mcsv1beta1.GroupName, Resource: "serviceimports", Namespace: ns},
			{Group: mcsv1beta1.GroupName, Resource: "serviceimports", Subresource: "status", Namespace: ns},
			{Group: "coordination.k8s.io", Resource: "leases", Namespace: api.LeaseNamespace},
			{Group: "about.k8s.io", Resource: "clusterproperties", Name: "cluster.clusterset.k8s.io"},
			{Resource: "configmaps", Namespace: "kube-system"},
		} {
			r.Verb = verb
			writes = append(writes, r)
		}
	}
	denied(t, dnsToken, m2, ns, append(writes, authorizationv1.ResourceAttributes{Verb: "get", Resource: "secrets", Namespace: ns}))
}

// deployRBAC applies, for real, the ServiceAccounts and RBAC objects that
// overlay dir renders, renamed as TestRunsUnderTheDeployedRBAC says, and
// deletes those outside namespace ns when the test ends.
func deployRBAC(t *testing.T, cluster, dir, ns string, moveNamespaced bool) {
	t.Helper()
	a := newApplier(t, cluster)
	for _, u := range render(t, dir) {
		if !slices.Contains([]string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, u.GetKind()) {
			continue
		}
		rename(u, ns, moveNamespaced)
		if err := a.apply(t.Context(), u, false); err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		if u.GetNamespace() == ns {
			continue
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ri, err := a.resource(u)
			if err == nil {
				err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("deleting %s %s in %s: %v", u.GetKind(), u.GetName(), cluster, err)
			}
		})
	}
}

// rename prefixes u's name, and the names it refers to, with ns, and moves
// ServiceAccounts (with moveNamespaced, every namespaced object) into ns.
// The rules stay as they are; the admission policy's account is the
// renamed one.
func rename(u *unstructured.Unstructured, ns string, moveNamespaced bool) {
	u.SetName(ns + "-" + u.GetName())
	if policy, ok, _ := unstructured.NestedString(u.Object, "spec", "policyName"); ok {
		_ = unstructured.SetNestedField(u.Object, ns+"-"+policy, "spec", "policyName")
	}
	conditions, _, _ := unstructured.NestedSlice(u.Object, "spec", "matchConditions")
	for _, c := range conditions {
		c := c.(map[string]any)
		c["expression"] = strings.ReplaceAll(c["expression"].(string), "system:serviceaccount:mcs-system:mcs-member", "system:serviceaccount:"+ns+":"+ns+"-mcs-member")
	}
	if conditions != nil {
		_ = unstructured.SetNestedSlice(u.Object, conditions, "spec", "matchConditions")
	}
	if u.GetKind() == "ServiceAccount" || (moveNamespaced && u.GetNamespace() != "") {
		u.SetNamespace(ns)
	}
	if ref, ok, _ := unstructured.NestedString(u.Object, "roleRef", "name"); ok {
		_ = unstructured.SetNestedField(u.Object, ns+"-"+ref, "roleRef", "name")
	}
	subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
	for _, s := range subjects {
		s := s.(map[string]any)
		s["name"], s["namespace"] = ns+"-"+s["name"].(string), ns
	}
	if subjects != nil {
		_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
	}
}

// registerMembers registers each member with the controller through the
// Secret of examples/member-secret, with the member's name and kubeconfig,
// in the controller's namespace ns.
func registerMembers(t *testing.T, ns string, kubeconfigs map[string]string) {
	t.Helper()
	example := find(t, render(t, "examples/member-secret"), "Secret", "member1")
	for member, path := range kubeconfigs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		s := example.DeepCopy()
		s.SetNamespace(ns)
		s.SetName(member)
		s.SetLabels(map[string]string{api.LabelCluster: member})
		if err := unstructured.SetNestedField(s.Object, base64.StdEncoding.EncodeToString(data), "data", api.KeyKubeconfig); err != nil {
			t.Fatal(err)
		}
		labtest.Get(t).Apply(t, hub, s)
	}
}

// startController runs bin/mcs-controller as the hub overlay's Deployment
// does (leader election, members from Secrets), with the hub kubeconfig
// given, its namespace being ns, syncing the services of apps.
func startController(t *testing.T, kubeconfig, ns, apps string) {
	t.Helper()
	p, addr := labtest.StartController(t, labtest.Get(t).Binary(t, "mcs-controller"), "--kubeconfig", kubeconfig,
		"--namespace", ns, "--watch-namespaces", apps, "--leader-elect=true", "--probe-interval", "1s")
	if err := p.WaitFor(t.Context(), converge, process.HTTPOK("http://"+addr+"/readyz")); err != nil {
		t.Fatal(err)
	}
}

// expectA waits until the DNS server at addr answers name's A query with
// exactly ip.
func expectA(t *testing.T, addr, name, ip string) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		q := new(dns.Msg).SetQuestion(name, dns.TypeA)
		r, err := dns.ExchangeContext(ctx, q, addr)
		if err != nil {
			return err
		}
		if len(r.Answer) != 1 {
			return fmt.Errorf("%s A: %s with %v, want %s", name, dns.RcodeToString[r.Rcode], r.Answer, ip)
		}
		if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != ip {
			return fmt.Errorf("%s A: %v, want %s", name, r.Answer, ip)
		}
		return nil
	})
}

// expectSynced waits until MultiClusterService ns/foo has every condition
// True and member1's ServiceExport ns/bar is Valid: the controller could
// write the hub's status and the member's export status.
func expectSynced(t *testing.T, ns string) {
	t.Helper()
	l := labtest.Get(t)
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		m, err := l.Dynamic(t, hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(ns).Get(ctx, "foo", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(m.Object, "status", "conditions")
		if err := allTrue(conds, v1alpha1.ServiceApplied, v1alpha1.EndpointSliceCollected, v1alpha1.EndpointSliceApplied); err != nil {
			return fmt.Errorf("MultiClusterService %s/foo: %w", ns, err)
		}
		e, err := l.Dynamic(t, m1).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace(ns).Get(ctx, "bar", metav1.GetOptions{})
		if err != nil {
			return err
		}
		conds, _, _ = unstructured.NestedSlice(e.Object, "status", "conditions")
		if err := allTrue(conds, string(mcsv1beta1.ServiceExportConditionValid)); err != nil {
			return fmt.Errorf("%s: ServiceExport %s/bar: %w", m1, ns, err)
		}
		return nil
	})
}

// allTrue checks that conditions has each of types with status True.
func allTrue(conditions []any, types ...string) error {
	for _, typ := range types {
		var status, message any = "missing", ""
		for _, c := range conditions {
			if c := c.(map[string]any); c["type"] == typ {
				status, message = c["status"], c["message"]
			}
		}
		if status != "True" {
			return fmt.Errorf("condition %s is %v (%v), want True", typ, status, message)
		}
	}
	return nil
}

// denied checks that the account of kubeconfig may do none of attrs in
// cluster, asking the API server with its own token (SelfSubjectAccessReview).
func denied(t *testing.T, kubeconfig, cluster, ns string, attrs []authorizationv1.ResourceAttributes) {
	t.Helper()
	client := clientOf(t, kubeconfig)
	for _, a := range attrs {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &a}}
		got, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(t.Context(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		if got.Status.Allowed {
			t.Errorf("%s: %s may %s %s/%s %s in namespace %q; the deployed role must not allow it",
				cluster, filepath.Base(kubeconfig), a.Verb, a.Resource, a.Subresource, a.Name, a.Namespace)
		}
	}
	// The same decisions on real requests: the account can neither delete a
	// Pod nor read the Secrets of kube-system.
	err := client.CoreV1().Pods(ns).Delete(t.Context(), "foo", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %s deleting Pod %s/foo: %v, want Forbidden", cluster, filepath.Base(kubeconfig), ns, err)
	}
	_, err = client.CoreV1().Secrets("kube-system").List(t.Context(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("%s: %s listing Secrets in kube-system: %v, want Forbidden", cluster, filepath.Base(kubeconfig), err)
	}
}

// policyInForce waits until the members' admission policy refuses the
// account of kubeconfig a write that RBAC allows: a Service without the
// controller's label.
func policyInForce(t *testing.T, kubeconfig, cluster, ns string) {
	t.Helper()
	client := clientOf(t, kubeconfig)
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		_, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "unlabelled"},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !refused(err) {
			return fmt.Errorf("%s: an unlabelled Service: %v, want refused by the admission policy", cluster, err)
		}
		return nil
	})
}

// refusedByPolicy checks that the member's admission policy refuses the
// account of kubeconfig every write a stolen token would make, which its
// RBAC allows: endpoints for default/kubernetes, objects in kube-system,
// a user's objects changed or deleted, a Service with externalIPs, a
// slice joined to a user's Service (namespaces: writesOnlyItsOwn).
func refusedByPolicy(t *testing.T, kubeconfig, cluster, apps string) {
	t.Helper()
	client := clientOf(t, kubeconfig)
	ctx := t.Context()
	ours := map[string]string{api.LabelManagedBy: api.ManagedBy}
	slice := func(ns, svc string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{GenerateName: "evil-", Labels: map[string]string{discoveryv1.LabelManagedBy: api.ManagedBy, discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.250.0.1"}}},
		}
	}
	service := func(name string, externalIPs ...string) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ours},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}, ExternalIPs: externalIPs},
		}
	}
	userSlices, err := client.DiscoveryV1().EndpointSlices(apps).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=foo"})
	if err != nil || len(userSlices.Items) == 0 {
		t.Fatalf("%s: the user's slices of foo: %v (%d)", cluster, err, len(userSlices.Items))
	}
	userService, err := client.CoreV1().Services(apps).Get(ctx, "foo", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	userService.Labels = ours
	for what, write := range map[string]func() error{
		"a slice of default/kubernetes": func() error {
			_, err := client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice("default", "kubernetes"), metav1.CreateOptions{})
			return err
		},
		"a Service in kube-system": func() error {
			_, err := client.CoreV1().Services("kube-system").Create(ctx, service("derived-evil"), metav1.CreateOptions{})
			return err
		},
		"a Service without the label": func() error {
			s := service("derived-evil")
			s.Labels = nil
			_, err := client.CoreV1().Services(apps).Create(ctx, s, metav1.CreateOptions{})
			return err
		},
		"the user's Service, labelled": func() error {
			_, err := client.CoreV1().Services(apps).Update(ctx, userService, metav1.UpdateOptions{})
			return err
		},
		"the user's slice deleted": func() error {
			return client.DiscoveryV1().EndpointSlices(apps).Delete(ctx, userSlices.Items[0].Name, metav1.DeleteOptions{})
		},
		"a Service with externalIPs": func() error {
			_, err := client.CoreV1().Services(apps).Create(ctx, service("derived-evil", "10.250.0.2"), metav1.CreateOptions{})
			return err
		},
		"a slice joined to the user's Service": func() error {
			_, err := client.DiscoveryV1().EndpointSlices(apps).Create(ctx, slice(apps, "foo"), metav1.CreateOptions{})
			return err
		},
	} {
		if err := write(); !refused(err) {
			t.Errorf("%s: %s: %v, want refused by the admission policy", cluster, what, err)
		}
	}
}

// refused reports whether err is a refusal by a ValidatingAdmissionPolicy.
func refused(err error) bool {
	return err != nil && (apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy")
}

// clientOf is a client with the credentials of kubeconfig.
func clientOf(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}
