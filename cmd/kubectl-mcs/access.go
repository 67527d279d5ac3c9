package main

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// legacyAccess is what join made in a member before the member account
// had a name of its own: the ServiceAccount mcs-system/mcs-controller (the
// hub controller's name), its RBAC and its admission policy. join deletes
// it once the hub's Secret holds a token of mcs-member, which revokes
// every token of the old account there (docs/operations.md, "Moving to the
// member account mcs-member").
const legacyAccess = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: mcs-controller-member}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: mcs-controller-member}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: mcs-controller-member}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: mcs-controller-member}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mcs-controller-leases, namespace: mcs-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: mcs-controller-leases, namespace: mcs-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mcs-controller-token, namespace: mcs-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: mcs-controller-token, namespace: mcs-system}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: mcs-controller, namespace: mcs-system}
`

// legacyAccount is the old account's ServiceAccount: on a cluster that is
// the hub, the controller's own, which nothing here deletes.
func legacyAccount(obj *unstructured.Unstructured) bool {
	return obj.GetKind() == "ServiceAccount" && obj.GetNamespace() == credentials.Namespace && obj.GetName() == "mcs-controller"
}

// deleteEach deletes every object of doc in the member but those keep
// says to keep, and counts those it deleted; one that is not there is no
// error.
func (m *memberClients) deleteEach(ctx context.Context, doc []byte, dryRun []string, keep func(*unstructured.Unstructured) bool) (deleted int, err error) {
	err = m.each(doc, func(r dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		if keep != nil && keep(obj) {
			return nil
		}
		err := r.Delete(ctx, obj.GetName(), metav1.DeleteOptions{DryRun: dryRun})
		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		deleted++
		return nil
	})
	return deleted, err
}
