//go:build lab

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// roll rolls the event's Deployment out as `kubectl rollout restart`
// does: a new pod template, so new pods with new addresses, the old ones
// removed as the new ones are ready (the Deployment's default strategy).
func (r *run) roll(ctx context.Context, e Event) error {
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{"chaos.coredns-mcs.io/rolled-at":%q}}}}}`, e.At.String())
	_, err := r.l.Client(r.t, e.Cluster).AppsV1().Deployments(r.ns).Patch(ctx, e.Service, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// setList sets a list of the event's MultiClusterService (field of its
// spec) to the event's, or removes it when the event lists none.
func (r *run) setList(ctx context.Context, e Event, field string) error {
	var list any // null removes the field: every member
	if l := clusterList(e.List); l != nil {
		list = l
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{field: list}})
	if err != nil {
		return err
	}
	_, err = r.mcs().Patch(ctx, e.Service, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// recreateMCS deletes the event's MultiClusterService and, the event's
// For later, makes it again with the spec it had. The controller's
// finalizer holds the old one until its imports are withdrawn: until then
// (or remakeTimeout) the create is tried again.
func (r *run) recreateMCS(ctx context.Context, e Event) error {
	old, err := r.mcs().Get(ctx, e.Service, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := r.mcs().Delete(ctx, e.Service, metav1.DeleteOptions{}); err != nil {
		return err
	}
	time.Sleep(e.For)
	again := &unstructured.Unstructured{Object: map[string]any{"apiVersion": old.GetAPIVersion(), "kind": old.GetKind(),
		"metadata": map[string]any{"name": e.Service, "namespace": r.ns}, "spec": old.Object["spec"]}}
	var last error
	err = wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, remakeTimeout, true, func(ctx context.Context) (bool, error) {
		_, last = r.mcs().Create(ctx, again, metav1.CreateOptions{})
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("made again for %s: %w", remakeTimeout, last)
	}
	return nil
}

// remakeTimeout bounds the wait to make a MultiClusterService again: its
// finalizer may wait for a controller that a fault stopped.
const remakeTimeout = 30 * time.Second

func (r *run) mcs() dynamic.ResourceInterface {
	return r.l.Dynamic(r.t, hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(r.ns)
}
