package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/leases"
)

// A consumer that hangs on every write delays no other consumer's Leases:
// theirs are renewed every round all the same.
func TestHungConsumerDelaysNoLease(t *testing.T) {
	f := newFixture(t, world{m1: {ns1()}, m2: {ns1()}, m3: {ns1()}})
	hung := make(chan struct{}) // the fake's writes cannot see a context
	f.kube[m2].PrependReactor("*", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-hung
		return true, nil, context.DeadlineExceeded
	})
	const every = 40 * time.Millisecond
	r := &leases.Renewer{Members: f.reg, Holder: "test", Duration: time.Second, Every: every}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() { close(hung); cancel(); <-done }()

	renewals := func(cluster string) []time.Time {
		var times []time.Time
		err := wait.PollUntilContextTimeout(t.Context(), every/4, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			l, err := f.kube[cluster].CoordinationV1().Leases(api.LeaseNamespace).Get(ctx, api.LeasePrefix+m1, metav1.GetOptions{})
			if err != nil || l.Spec.RenewTime == nil {
				return false, nil
			}
			if n := len(times); n == 0 || !times[n-1].Equal(l.Spec.RenewTime.Time) {
				times = append(times, l.Spec.RenewTime.Time)
			}
			return len(times) == 5, nil
		})
		if err != nil {
			t.Fatalf("%s's Lease %s%s was renewed %d times, want 5", cluster, api.LeasePrefix, m1, len(times))
		}
		return times
	}
	for _, c := range []string{m1, m3} {
		times := renewals(c)
		for i := 1; i < len(times); i++ {
			if gap := times[i].Sub(times[i-1]); gap > 3*every {
				t.Errorf("%s: %s between renewals while member2 hangs, want about %s", c, gap, every)
			}
		}
	}
}

// A member whose admission policy refuses the controller any write in
// mcs-system, the Namespace included (deploy/member), gets its Leases all
// the same: the Namespace is written only when a Lease cannot be made for
// its lack.
func TestLeaseNeedsNoNamespaceWrite(t *testing.T) {
	f := newFixture(t, world{m1: {ns1()}, m2: {ns1()}, m3: {ns1()}})
	var namespaceWrites atomic.Int32
	f.kube[m2].PrependReactor("create", "namespaces", func(clienttesting.Action) (bool, runtime.Object, error) {
		namespaceWrites.Add(1)
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "namespaces"}, api.LeaseNamespace, errors.New("mcs-controller writes nothing in namespace mcs-system"))
	})
	var present atomic.Bool // member3 lacks the namespace at first
	f.kube[m3].PrependReactor("create", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
		if !present.Swap(true) {
			return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, api.LeaseNamespace)
		}
		return false, nil, nil
	})
	r := &leases.Renewer{Members: f.reg, Holder: "test", Duration: time.Second, Every: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx)
	}()
	defer func() { cancel(); <-done }()
	for _, c := range []string{m2, m3} {
		err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := f.kube[c].CoordinationV1().Leases(api.LeaseNamespace).Get(ctx, api.LeasePrefix+m1, metav1.GetOptions{})
			return err == nil, nil
		})
		if err != nil {
			t.Errorf("%s has no Lease %s%s", c, api.LeasePrefix, m1)
		}
	}
	if n := namespaceWrites.Load(); n != 0 {
		t.Errorf("%d writes of Namespace %s into member2, which has it, want none", n, api.LeaseNamespace)
	}
	if _, err := f.kube[m3].CoreV1().Namespaces().Get(t.Context(), api.LeaseNamespace, metav1.GetOptions{}); err != nil {
		t.Errorf("member3, which lacked it, has no Namespace %s: %v", api.LeaseNamespace, err)
	}
}
