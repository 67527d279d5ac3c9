package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// An initial sync writes each MultiClusterService twice on the hub, its
// finalizer and its conditions, with the controller's workers running as
// mcs-controller runs them, over a consumer whose API server is busy with
// the sync's own writes: each write there takes perWrite, so that one
// service's writes take less than memberWait but a few under way at once
// take more (the lab's member2 at a 1,000-service initial sync). A sync
// whose writes into the consumer wrote nothing, because an earlier sync
// wrote them, is reported by what it found: it does not say the consumer
// is slow, nor flip the conditions to MemberSlow and back (three status
// writes and two Events where one write is the floor).
func TestInitialSyncWritesTheHubFloor(t *testing.T) {
	// 5 writes a ClusterSetIP service: 400 ms alone, 1.6 s among 4 at
	// once; 4.8 s all told, below memberLate however the workers are
	// scheduled, since only a write moves the clock while one is under
	// way.
	const (
		n        = 12
		perWrite = 80 * time.Millisecond
	)
	fc := clocktesting.NewFakeClock(t0)
	w := world{m1: {ns1()}, m2: {ns1()}, m3: {ns1()}}
	var names []string
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		names = append(names, name)
		w[hub] = append(w[hub], multiClusterService(name, api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, false))
		w[m1] = append(w[m1], service(name, false, t0), slice(name, name+"-1", 1, fmt.Sprintf("10.1.0.%d", i+1)))
	}
	f := newFixture(t, w, withOptions(Options{Clock: fc, MemberInFlight: 4}))
	busy := func(a clienttesting.Action) (bool, runtime.Object, error) {
		if slices.Contains([]string{"create", "update", "patch", "delete"}, a.GetVerb()) && a.GetResource().Resource != "events" {
			fc.Step(perWrite)
		}
		return false, nil, nil
	}
	f.kube[m2].PrependReactor("*", "*", busy)
	f.mcs[m2].PrependReactor("*", "*", busy)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for range 4 {
		go f.c.work(ctx)
	}
	f.c.memberChanged("") // what Run does once the workers start
	settled := func() bool {
		for _, name := range names {
			c := meta.FindStatusCondition(f.mcsOf(name).Status.Conditions, v1alpha1.EndpointSliceApplied)
			if c == nil || c.Status != metav1.ConditionTrue {
				return false
			}
		}
		return f.c.queue.Len() == 0 && !flying(f)
	}
	// The clock moves with member2's writes; while none is under way, by
	// the queue's delays, until every service is imported and reported.
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if settled() {
			return true, nil
		}
		if !flying(f) {
			fc.Step(10 * time.Millisecond)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("the initial sync never settled: %v", err)
	}
	perService := map[string][]string{}
	for _, a := range f.writes()[hub] {
		if a.GetResource().Resource == "multiclusterservices" {
			verb := describe(a)
			perService[nameOf(a)] = append(perService[nameOf(a)], verb[:strings.Index(verb, " demo/")])
		}
	}
	want := []string{"patch multiclusterservices", "update multiclusterservices/status"}
	for _, name := range names {
		if got := perService[name]; !slices.Equal(got, want) {
			t.Errorf("hub writes of %s at the initial sync: %v, want %v", name, got, want)
		}
	}
}

// flying reports whether any member's writes are under way.
func flying(f *fixture) bool {
	busy := false
	f.c.fan.flights.Range(func(flight, bool) bool { busy = true; return false })
	return busy
}
