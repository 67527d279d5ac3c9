//go:build lab

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/deploy/member"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// A member joined before the member account had a name of its own holds
// the account mcs-system/mcs-controller, its RBAC and admission policy.
// join again moves it (docs/operations.md, "Moving to the member account
// mcs-member"): the hub's Secret then holds a token of mcs-member, the old
// account's access is gone and its tokens no longer authenticate. join
// --create-namespaces grants the account namespace creation, and
// --create-namespaces=false takes it back.
func TestJoinMovesTheOldAccount(t *testing.T) {
	l := labtest.Get(t)
	ctl := l.Namespace(t, labtest.Hub)
	m := labMember(t, labtest.Member3)
	if err := m.each(legacyManifest(t), m.apply(t.Context(), nil)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = m.deleteEach(ctx, []byte(legacyAccess), nil, nil)
		_, _ = kubectlMCS(t, "unjoin", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ctl, "--timeout", "0s")
	})
	old, err := m.kube.CoreV1().ServiceAccounts(memberNamespace).CreateToken(t.Context(), "mcs-controller", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if who := whoAmI(t, old.Status.Token); who != "system:serviceaccount:mcs-system:mcs-controller" {
		t.Fatalf("the old account's token authenticates as %q", who)
	}

	join := []string{"join", labtest.Member3, "--context", labtest.Member3, "--hub-context", labtest.Hub, "--controller-namespace", ctl, "--duration", "1h"}
	out, err := kubectlMCS(t, append(join, "--create-namespaces")...)
	if err != nil || !strings.Contains(out, "the old account mcs-system/mcs-controller's access deleted there (9 objects)") {
		t.Fatalf("join over the old account: %v\n%s", err, out)
	}
	if who := whoAmI(t, memberToken(t, ctl)); who != "system:serviceaccount:mcs-system:mcs-member" {
		t.Errorf("the Secret's token authenticates as %q, want the member account mcs-member", who)
	}
	labtest.Eventually(t, 30*time.Second, func(context.Context) error {
		if who := whoAmI(t, old.Status.Token); who != "" {
			return fmt.Errorf("the old account's token still authenticates as %q", who)
		}
		return nil
	})
	rbac := l.Client(t, labtest.Member3).RbacV1()
	if _, err := rbac.ClusterRoles().Get(t.Context(), "mcs-controller-member", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the old account's ClusterRole after join: %v, want it gone", err)
	}
	if _, err := rbac.ClusterRoleBindings().Get(t.Context(), "mcs-member-namespaces", metav1.GetOptions{}); err != nil {
		t.Errorf("join --create-namespaces: the ClusterRoleBinding mcs-member-namespaces: %v", err)
	}

	if out, err := kubectlMCS(t, join...); err != nil || strings.Contains(out, "old account") {
		t.Fatalf("join again: %v\n%s", err, out)
	}
	if _, err := rbac.ClusterRoleBindings().Get(t.Context(), "mcs-member-namespaces", metav1.GetOptions{}); err != nil {
		t.Errorf("join without --create-namespaces took the grant back: %v, want it kept", err)
	}
	if out, err := kubectlMCS(t, append(join, "--create-namespaces=false")...); err != nil {
		t.Fatalf("join --create-namespaces=false: %v\n%s", err, out)
	}
	if _, err := rbac.ClusterRoleBindings().Get(t.Context(), "mcs-member-namespaces", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("join --create-namespaces=false: the ClusterRoleBinding mcs-member-namespaces: %v, want it gone", err)
	}
}

// labMember reaches cluster as kubectl mcs does, through the lab's
// kubeconfig.
func labMember(t *testing.T, cluster string) *memberClients {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	kubeconfig := labtest.Get(t).Kubeconfig()
	flags.KubeConfig, flags.Context = &kubeconfig, &cluster
	m, err := memberOf(flags)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// legacyManifest is deploy/member's account as join made it before the
// member account had a name of its own: the ServiceAccount mcs-controller,
// the ClusterRole and binding and the admission policy
// mcs-controller-member, the Roles mcs-controller-leases and -token.
func legacyManifest(t *testing.T) []byte {
	t.Helper()
	text := strings.NewReplacer(
		"name: mcs-member-leases", "name: mcs-controller-leases",
		"name: mcs-member-token", "name: mcs-controller-token",
		"resourceNames: [mcs-member]", "resourceNames: [mcs-controller]",
		"system:serviceaccount:mcs-system:mcs-member'", "system:serviceaccount:mcs-system:mcs-controller'",
		"policyName: mcs-member", "policyName: mcs-controller-member",
	).Replace(string(member.ControllerRBAC) + "\n---\n" + string(member.ControllerAdmission))
	objs, err := decode([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		switch {
		case u.GetKind() == "ServiceAccount":
			u.SetName("mcs-controller")
		case u.GetName() == "mcs-member":
			u.SetName("mcs-controller-member")
		}
		if ref, ok, _ := unstructured.NestedString(u.Object, "roleRef", "name"); ok && ref == "mcs-member" {
			_ = unstructured.SetNestedField(u.Object, "mcs-controller-member", "roleRef", "name")
		}
		subjects, _, _ := unstructured.NestedSlice(u.Object, "subjects")
		for _, s := range subjects {
			s.(map[string]any)["name"] = "mcs-controller"
		}
		if subjects != nil {
			_ = unstructured.SetNestedSlice(u.Object, subjects, "subjects")
		}
	}
	var out []byte
	for _, u := range objs {
		b, err := json.Marshal(u)
		if err != nil {
			t.Fatal(err)
		}
		out = append(append(out, b...), '\n')
	}
	return out
}
