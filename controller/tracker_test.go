package controller

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func object(uid types.UID, rv string) *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{UID: uid, ResourceVersion: rv}}
}

func TestTrackerLatest(t *testing.T) {
	tr := newTracker(clock.RealClock{}, nil)
	k := trackKey{cluster: "m2", kind: "Service", namespace: "ns", name: "derived-foo"}
	written, older, newer := object("a", "10"), object("a", "9"), object("a", "11")

	if got := tr.latest(k, older); got != older {
		t.Fatalf("nothing written: got %v, want the cache", got)
	}
	tr.wrote(k, written, "ns/foo")
	if got := tr.latest(k, nil); got != written {
		t.Errorf("created, not cached yet: got %v, want what was written", got)
	}
	if got := tr.latest(k, older); got != written {
		t.Errorf("cache behind the write: got %v, want what was written", got)
	}
	if got := tr.latest(k, newer); got != newer {
		t.Errorf("cache past the write: got %v, want the cache", got)
	}
	if _, ok := tr.objs[k]; ok {
		t.Error("the write is still tracked once the cache caught up")
	}

	tr.deleted(k, "a")
	if got := tr.latest(k, written); got != nil {
		t.Errorf("deleted, still cached: got %v, want nil", got)
	}
	recreated := object("b", "12")
	if got := tr.latest(k, recreated); got != recreated {
		t.Errorf("recreated by someone else: got %v, want the cache", got)
	}
}

func TestTrackerSweeps(t *testing.T) {
	tr := newTracker(clock.RealClock{}, nil)
	stale := trackKey{name: "imported-m1-gone"}
	tr.objs[stale] = tracked{deleted: "x", at: time.Now().Add(-2 * trackTTL)}
	tr.wrote(trackKey{name: "fresh"}, object("f", "1"), "ns/foo")
	if _, ok := tr.objs[stale]; ok {
		t.Error("an entry older than trackTTL that is never looked up again was kept")
	}
	if len(tr.objs) != 1 {
		t.Errorf("%d entries, want the fresh one", len(tr.objs))
	}
}

// What an initial sync wrote last goes without another write to sweep it.
func TestTrackerSweepsWhenIdle(t *testing.T) {
	tr := newTracker(clock.RealClock{}, nil)
	tr.objs[trackKey{name: "derived-last"}] = tracked{obj: object("l", "9"), at: time.Now().Add(-2 * trackTTL)}
	tr.sweep()
	if len(tr.objs) != 0 {
		t.Errorf("%d entries older than trackTTL kept by a sweep, want none", len(tr.objs))
	}
}

// An informer delivering the controller's own write is an echo; once it
// delivers the write deleted, the write is forgotten: the deletion reads
// as one.
func TestTrackerDelivered(t *testing.T) {
	k := trackKey{cluster: "m2", kind: "EndpointSlice", namespace: "ns", name: "imported-m1-foo"}
	written := object("a", "10")
	for _, tc := range []struct {
		name      string
		obj       *corev1.Service
		gone      bool
		echo      bool
		forgotten bool
	}{
		{"the write itself", object("a", "10"), false, true, false},
		{"someone's change after it", object("a", "11"), false, false, false},
		{"an older state", object("a", "9"), false, false, false},
		{"the write deleted by someone", object("a", "10"), true, false, true},
		{"an object deleted before it was made", object("z", "8"), true, false, false},
	} {
		tr := newTracker(clock.RealClock{}, nil)
		if tr.delivered(k, tc.obj, tc.gone) {
			t.Errorf("%s, nothing written: an echo", tc.name)
		}
		tr.wrote(k, written, "ns/foo")
		if got := tr.delivered(k, tc.obj, tc.gone); got != tc.echo {
			t.Errorf("%s: echo %t, want %t", tc.name, got, tc.echo)
		}
		if _, kept := tr.objs[k]; kept == tc.forgotten {
			t.Errorf("%s: write kept %t, want %t", tc.name, kept, !tc.forgotten)
		}
		if tc.gone && tc.forgotten && tr.latest(k, nil) != nil {
			t.Errorf("%s: latest is the forgotten write, want nothing", tc.name)
		}
	}

	tr := newTracker(clock.RealClock{}, nil)
	tr.deleted(k, "a")
	if tr.delivered(k, written, false) {
		t.Error("deleted by us: the last write's copy is no echo")
	}
	tr.delivered(k, written, true)
	if _, kept := tr.objs[k]; kept {
		t.Error("our deletion is remembered after the informer delivered it")
	}
}

// A write that its informer never delivered (made and deleted by someone
// else between two lists of a relisting informer) queues its service when
// it is swept: until then the sync took it for present, and nothing else
// would queue the service to make it anew. A delivered write queues
// nothing.
func TestTrackerUnseenWriteQueuesItsService(t *testing.T) {
	fc := clocktesting.NewFakeClock(t0)
	var queued []string
	tr := newTracker(fc, func(_ trackKey, w tracked) { queued = append(queued, w.service) })
	seen := trackKey{cluster: "m2", kind: "EndpointSlice", namespace: "ns", name: "imported-m1-bar"}
	unseen := trackKey{cluster: "m2", kind: "EndpointSlice", namespace: "ns", name: "imported-m1-foo"}
	tr.wrote(seen, object("a", "10"), "ns/bar")
	tr.wrote(unseen, object("b", "11"), "ns/foo")
	tr.delivered(seen, object("a", "10"), false)
	fc.Step(trackTTL + time.Second)
	tr.sweep()
	if !slices.Equal(queued, []string{"ns/foo"}) {
		t.Errorf("the sweep queued %v, want ns/foo alone", queued)
	}
	if got := tr.latest(unseen, nil); got != nil {
		t.Errorf("the unseen write is still taken for present: %v", got)
	}
}
