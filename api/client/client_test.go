// Package client_test shows the generated clientset, informers and listers
// of api/client working together, on the fake clientset.
package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned/fake"
	"github.com/coredns-mcs/coredns-mcs/api/client/informers/externalversions"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// TestFakeClientsetInformerLister creates a MultiClusterService through the
// fake typed clientset, sees it in the generated informer and lister, and
// sets its status through UpdateStatus.
func TestFakeClientsetInformerLister(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cs := fake.NewSimpleClientset()

	// The fake's watch does not replay what was created between the
	// informer's list and its watch, so create only once the watch is there.
	watching := make(chan struct{})
	var once sync.Once
	cs.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := cs.Tracker().Watch(action.GetResource(), action.GetNamespace())
		if err != nil {
			return false, nil, err
		}
		once.Do(func() { close(watching) })
		return true, w, nil
	})

	factory := externalversions.NewSharedInformerFactory(cs, 0)
	mcsInformer := factory.Mcs().V1alpha1().MultiClusterServices()
	events := make(chan *v1alpha1.MultiClusterService, 10)
	send := func(obj any) {
		if m, ok := obj.(*v1alpha1.MultiClusterService); ok {
			events <- m
		}
	}
	if _, err := mcsInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    send,
		UpdateFunc: func(_, obj any) { send(obj) },
	}); err != nil {
		t.Fatal(err)
	}
	lister := mcsInformer.Lister()
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is done.
	defer factory.Shutdown()
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("%v did not sync", typ)
		}
	}
	select {
	case <-watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer did not watch")
	}

	client := cs.McsV1alpha1().MultiClusterServices("ns")
	created, err := client.Create(ctx, &v1alpha1.MultiClusterService{
		ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "ns"},
		Spec: v1alpha1.MultiClusterServiceSpec{
			Types:    []v1alpha1.ExposureType{v1alpha1.CrossCluster},
			Strategy: api.LocalFirst,
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := next(t, events); m.Name != "foo" || m.Spec.Strategy != api.LocalFirst {
		t.Fatalf("informer saw %s/%s strategy %q", m.Namespace, m.Name, m.Spec.Strategy)
	}
	listed, err := lister.MultiClusterServices("ns").Get("foo")
	if err != nil {
		t.Fatal(err)
	}
	if listed.Spec.Strategy != api.LocalFirst {
		t.Fatalf("lister has strategy %q", listed.Spec.Strategy)
	}
	_, err = lister.MultiClusterServices("ns").Get("bar")
	if !apierrors.IsNotFound(err) || err.(apierrors.APIStatus).Status().Details.Group != api.GroupName {
		t.Fatalf("lister Get of a missing one: %v, want not found in %s", err, api.GroupName)
	}

	created.Status.Conditions = []metav1.Condition{{
		Type: v1alpha1.EndpointSliceApplied, Status: metav1.ConditionTrue,
		Reason: "Applied", LastTransitionTime: metav1.Now(),
	}}
	if _, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if m := next(t, events); !meta.IsStatusConditionTrue(m.Status.Conditions, v1alpha1.EndpointSliceApplied) {
		t.Fatalf("informer saw conditions %v", m.Status.Conditions)
	}
	listed, err = lister.MultiClusterServices("ns").Get("foo")
	if err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(listed.Status.Conditions, v1alpha1.EndpointSliceApplied) {
		t.Fatalf("lister has conditions %v", listed.Status.Conditions)
	}
	all, err := lister.List(labels.Everything())
	if err != nil || len(all) != 1 {
		t.Fatalf("lister lists %d, %v; want 1", len(all), err)
	}

	var statusUpdates int
	for _, a := range cs.Actions() {
		if a.Matches("update", "multiclusterservices") && a.GetSubresource() == "status" {
			statusUpdates++
		}
	}
	if statusUpdates != 1 {
		t.Fatalf("%d status updates recorded, want 1: %v", statusUpdates, cs.Actions())
	}
}

func next(t *testing.T, events <-chan *v1alpha1.MultiClusterService) *v1alpha1.MultiClusterService {
	t.Helper()
	select {
	case m := <-events:
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no informer event")
		return nil
	}
}
