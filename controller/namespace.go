package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The service's namespace in a member: made where missing, never removed.

// ensureNamespace creates the service's namespace when the member lacks it,
// if the controller may (Options.CreateNamespaces); else it says how to
// have it. It is never deleted: users may have put things in it since.
func (w *writer) ensureNamespace(ctx context.Context) error {
	// A Namespace is of no namespace: keyed as its informer delivers it.
	key := trackKey{cluster: w.m.Name, kind: "Namespace", name: w.namespace}
	if w.m.HasNamespace(w.namespace) || w.track.latest(key, nil) != nil {
		return nil
	}
	if !w.createNamespaces {
		return fmt.Errorf("%s has no namespace %s, and mcs-controller creates none without --create-namespaces: create it there, or see docs/operations.md, \"Namespaces in consumers\"", w.m.Name, w.namespace)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace, Labels: map[string]string{api.LabelManagedBy: api.ManagedBy}}}
	return w.do("Namespace", "create", func() error {
		got, err := w.m.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err == nil {
			w.track.wrote(key, members.Trim(got), w.svcKey)
		}
		return err
	})
}
