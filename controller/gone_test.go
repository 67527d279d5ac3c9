package controller

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// jumpClock is a fake clock that, once told, moves on by a step right
// after the next time it is read: the tracker's, so that what it recorded
// then is forgotten before it is next asked.
type jumpClock struct {
	*clocktesting.FakeClock
	jump atomic.Int64 // the step, in nanoseconds; 0: none
}

func (c *jumpClock) Now() time.Time {
	now := c.FakeClock.Now()
	if d := c.jump.Swap(0); d != 0 {
		c.FakeClock.Step(time.Duration(d))
	}
	return now
}

// A ServiceImport the controller made and someone else deleted at once,
// its deletion delivered before the sync went on (so that the tracker
// forgot the write and the cache holds nothing), fails that sync, which
// the queue retries, rather than the process: the next sync makes it
// anew. The fake answers the create without storing it, as an API server
// whose object was deleted right after; the tracker's clock moves past
// trackTTL between its write and any later read, as a delivered deletion
// would have made it forget. (Before the writes went on with what the API
// server returned, the sync read the import back from the tracker and the
// cache, found nothing, and its fanout goroutine took the process down.)
func TestImportGoneRightAfterItsWrite(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	})
	// The tracker's own: no wait of the sync's moves with it.
	fc := &jumpClock{FakeClock: clocktesting.NewFakeClock(t0)}
	f.c.track.clock = fc
	var gone atomic.Bool
	f.mcs[m2].PrependReactor("create", "serviceimports", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if !gone.CompareAndSwap(false, true) {
			return false, nil, nil
		}
		imp := a.(clienttesting.CreateAction).GetObject().(*mcsv1b1.ServiceImport).DeepCopy()
		imp.UID, imp.ResourceVersion = "uid-gone", "1000000"
		fc.jump.Store(int64(trackTTL + time.Second))
		return true, imp, nil
	})

	f.syncFailing("demo/foo", "not found")
	f.sync("demo/foo")
	imp := f.importOf(m2, "foo")
	if imp == nil || len(imp.Spec.IPs) == 0 || imp.Spec.IPs[0] != f.serviceOf(m2, "derived-foo").Spec.ClusterIP {
		t.Errorf("member2's import once synced again: %+v, want one at derived-foo's VIP", imp)
	}
	if f.sliceOf(m2, "imported-member1-foo-1") == nil {
		t.Error("member2 has no imported slice once synced again")
	}
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// A panic in one member's writes fails that member's writes of the sync
// alone, which is retried, and is counted: every other member is written,
// and the process lives on.
func TestPanicInAMembersWritesFailsItsSyncAlone(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0)},
		m2: {ns1()},
		m3: {ns1()},
	})
	var panicked atomic.Bool
	f.kube[m3].PrependReactor("create", "endpointslices", func(clienttesting.Action) (bool, runtime.Object, error) {
		if panicked.CompareAndSwap(false, true) {
			panic("a defect met in member3's writes")
		}
		return false, nil, nil
	})
	before := testutil.ToFloat64(writePanics)
	got := f.syncFailing("demo/foo", "member3: an internal error (a panic) stopped the writes: a defect met in member3's writes")
	all := firstImport("foo", "imported-member1-foo-1")
	if !strings.Contains(strings.Join(got[m2], ","), strings.Join(all, ",")) {
		t.Errorf("member2 got %v, want its import whole: %v", got[m2], all)
	}
	if n := testutil.ToFloat64(writePanics) - before; n != 1 {
		t.Errorf("mcs_write_panics_total grew by %v, want 1", n)
	}
	// member1's export is Ready once member3 has it too.
	expect(t, "retried", f.sync("demo/foo"), writes{
		m1: {"update serviceexports/status demo/foo"}, m3: {"create endpointslices demo/imported-member1-foo-1"},
	})
}
