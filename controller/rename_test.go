package controller

import (
	"context"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// renamedTo connects a member named to to the fakes of cluster from, as
// a member Secret relabelled from from to to does.
func renamedTo(from, to string) option {
	return func(f *fixture) {
		registration := f.registration
		f.registration = func(o *members.Options) {
			registration(o)
			o.Connect = func(name, source string, _ *rest.Config) (*members.Member, error) {
				cluster := name
				if name == to {
					cluster = from
				}
				return members.New(name, source, f.kube[cluster], f.mcs[cluster]), nil
			}
		}
	}
}

func kubeSystem(uid string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem, UID: types.UID(uid)}}
}

// A member renamed by relabelling its Secret hands its cluster over to
// the new name: the old name writes nothing more there and is let go once
// the new one has synced, and in every consumer the service keeps its
// import, VIP and endpoints throughout; only the old name's slice is
// replaced by the new name's. Nothing else is deleted anywhere.
func TestRenameHandsTheClusterOver(t *testing.T) {
	f := newFixture(t, renameWorld(), fromSecrets(), renamedTo(m1, "member9"))
	f.sync("demo/serve")
	vip := f.importOf(m2, "serve").Spec.IPs

	f.relabel(m1, "member9")
	f.writes()
	var all []string
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		if err := f.c.sync(context.Background(), "demo/serve"); err != nil {
			t.Logf("sync: %v", err)
		}
		f.c.retireCleaned()
		for cluster, actions := range f.writes() {
			for _, a := range actions {
				all = append(all, cluster+": "+describe(a))
			}
		}
		if !f.sliceExists(m2, "imported-member1-serve-1") && !f.sliceExists(m2, "imported-member9-serve-1") {
			t.Errorf("member2 holds neither name's slice of serve after %v", all)
		}
		return !registered(f, m1) && registered(f, "member9") && f.sliceExists(m2, "imported-member9-serve-1") && !f.sliceExists(m2, "imported-member1-serve-1"), nil
	})
	if err != nil {
		t.Fatalf("the rename never completed; writes: %v", all)
	}
	for _, w := range all {
		if strings.Contains(w, "delete") && !strings.Contains(w, "endpointslices demo/imported-member1-serve-1") {
			t.Errorf("the rename deleted what it should have handed over: %s", w)
		}
	}
	for _, c := range []string{m1, m2, m3} {
		if got := f.importOf(c, "serve").Spec.IPs; len(got) == 0 || got[0] != vip[0] && c == m2 {
			t.Errorf("%s's import of serve after the rename: %v, want it kept (member2's at %v)", c, got, vip)
		}
	}
}

// A renamed provider keeps the age of its export: it is the same export.
// Aged anew, it would be the newest, and a second provider whose Service
// differs would take the import's definition over (the oldest export
// wins) because of a rename.
func TestRenameKeepsTheExportsAge(t *testing.T) {
	f := newFixture(t, renameWorld(), fromSecrets(), renamedTo(m1, "member9"))
	f.sync("demo/serve")
	other := service("serve", false, t0)
	other.Spec.Ports[0].Port = 81
	f.change(m2, other, "create")
	f.change(m2, slice("serve", "serve-2", 1, "10.2.0.1"), "create")
	f.change(m2, export("serve", t0), "create")
	f.sync("demo/serve")
	first := f.agesOf("serve").Data[m1]
	if first == "" {
		t.Fatalf("no age of member1's export: %v", f.agesOf("serve").Data)
	}

	f.relabel(m1, "member9")
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		if err := f.c.sync(context.Background(), "demo/serve"); err != nil {
			t.Logf("sync: %v", err)
		}
		f.c.retireCleaned()
		return !registered(f, m1) && f.sliceExists(m3, "imported-member9-serve-1"), nil
	})
	if err != nil {
		t.Fatal("the rename never completed")
	}
	// The fixture's sync would ask for member1, which may be gone by now.
	if err := f.c.sync(context.Background(), "demo/serve"); err != nil {
		t.Fatal(err)
	}
	if ages := f.agesOf("serve").Data; ages["member9"] != first || ages[m1] != "" {
		t.Errorf("ages after the rename %v, want member9 at member1's %s, and member1 gone", ages, first)
	}
	if imp := f.importOf(m3, "serve"); len(imp.Spec.Ports) != 1 || imp.Spec.Ports[0].Port != 80 {
		t.Errorf("import ports after the rename %+v, want the renamed member's 80: its export is still the oldest", imp.Spec.Ports)
	}
}

// renameWorld is joinedWorld with each member's identity.
func renameWorld() world {
	w := joinedWorld()
	for _, c := range memberNames {
		w[c] = append(w[c], kubeSystem("uid-of-"+c))
	}
	return w
}

// relabel renames the member the hub's Secret secret registers to name to,
// as the README says.
func (f *fixture) relabel(secret, to string) {
	f.t.Helper()
	s, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Get(context.Background(), secret, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	s.Labels[api.LabelCluster] = to
	if _, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// A rename that lands while a sync runs, between the sync's reading of
// its input and its writes (the fake clock's hook stands there: the sync
// asks the clock once the plan is made), changes nothing that sync
// writes: the new name, unknown to its plan, is not written to. Before,
// it was written to as a member that takes no part in the service, and
// the import and derived-serve it reaches (member1's own) were deleted.
func TestRenameBetweenInputAndWrites(t *testing.T) {
	clk := &hookClock{FakeClock: clocktesting.NewFakeClock(t0)}
	f := newFixture(t, renameWorld(), fromSecrets(), renamedTo(m1, "member9"), withOptions(Options{Clock: clk}))
	f.sync("demo/serve")

	clk.arm(func() {
		f.relabel(m1, "member9")
		f.await("member9 synced and member1 retiring", func() bool {
			return registered(f, "member9") && f.member("member9").Synced() && f.member(m1).Retiring()
		})
	})
	got := f.syncWrites("demo/serve")
	clk.fired(t)
	noDeletes(t, "the sync the rename landed in", got)
	if _, err := f.mcs[m1].MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), "serve", metav1.GetOptions{}); err != nil {
		t.Errorf("member1's cluster lost its import of serve: %v", err)
	}
}

// A successor whose caches sync while a sync reads its input (the hook of
// the fake clock stands between the retiring member1 and member9: the
// input asks it how long member3 has been down) is read as it was when
// the sync began, for both names. Before, member1 was kept for a
// successor read as not synced, then member9 read as synced provided too:
// both names in one input made the hub's ages record of the service,
// deleted again at the next sync.
func TestRenameSuccessorSyncsDuringInput(t *testing.T) {
	clk := &hookClock{FakeClock: clocktesting.NewFakeClock(t0)}
	var holding atomic.Bool
	release := make(chan struct{})
	hold := func(f *fixture) {
		// Lists of member1's cluster wait while holding: member9's first
		// ones (member1's informers have listed and only watch).
		for _, fake := range []*clienttesting.Fake{&f.kube[m1].Fake, &f.mcs[m1].Fake} {
			fake.PrependReactor("list", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
				if holding.Load() {
					<-release
				}
				return false, nil, nil
			})
		}
	}
	f := newFixture(t, renameWorld(), fromSecrets(), renamedTo(m1, "member9"), withDown(m3),
		withOptions(Options{Clock: clk, StaleAfter: time.Hour}), func(f *fixture) { f.prepare = hold })
	f.sync("demo/serve")

	holding.Store(true)
	f.relabel(m1, "member9")
	f.await("member9 probed, its identity known, not synced", func() bool {
		if !registered(f, "member9") {
			return false
		}
		m := f.member("member9")
		_, known := m.Identity()
		return m.ProbedOnce() && known && !m.Synced() && f.member(m1).Retiring()
	})
	clk.arm(func() {
		close(release)
		f.await("member9 synced", func() bool { return f.member("member9").Synced() })
	})
	got := f.syncWrites("demo/serve")
	clk.fired(t)
	for cluster, w := range f.syncWrites("demo/serve") {
		got[cluster] = append(got[cluster], w...)
	}
	for cluster, writes := range got {
		for _, w := range writes {
			if strings.HasPrefix(w, "delete ") && w != "delete endpointslices demo/imported-member1-serve-1" {
				t.Errorf("the hand-over deleted in %s: %s", cluster, w)
			}
		}
	}
	if w := got[hub]; slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "configmaps") }) {
		t.Errorf("the hand-over wrote the hub's ages record of a service of one provider: %q", w)
	}
}

// syncWrites syncs key and returns the writes since the last call, as
// describe spells them, once every member's writes ended: unlike sync, it
// waits for no cache (the hub's Secrets are not cached, and a renamed
// member leaves).
func (f *fixture) syncWrites(key string) map[string][]string {
	f.t.Helper()
	f.writes()
	if err := f.c.sync(context.Background(), key); err != nil {
		f.t.Logf("sync: %v", err)
	}
	// A sync stops waiting for writes once a source changes (fanout.go):
	// a new name's informers listing are such changes.
	f.await("the sync's writes ended", func() bool {
		busy := false
		f.c.fan.flights.Range(func(flight, bool) bool { busy = true; return false })
		return !busy
	})
	got := map[string][]string{}
	for cluster, actions := range f.writes() {
		for _, a := range actions {
			got[cluster] = append(got[cluster], describe(a))
		}
	}
	return got
}

// await waits until done, or fails the test saying what.
func (f *fixture) await(what string, done func() bool) {
	f.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return done(), nil
	})
	if err != nil {
		f.t.Fatalf("never: %s", what)
	}
}

// hookClock is a fake clock that runs a hook once, when first asked the
// time on the goroutine that armed it: the test's own, which runs the
// sync, so that the hook changes the world at a known point of the sync
// (every other goroutine asks it too: the probes, the informers).
type hookClock struct {
	*clocktesting.FakeClock
	mu   sync.Mutex
	on   string
	hook func()
}

func (c *hookClock) arm(hook func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on, c.hook = goroutine(), hook
}

func (c *hookClock) Now() time.Time {
	c.mu.Lock()
	hook := c.hook
	if hook != nil && c.on == goroutine() {
		c.hook = nil
	} else {
		hook = nil
	}
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	return c.FakeClock.Now()
}

func (c *hookClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// fired fails the test if the hook did not run: the sync did not ask the
// clock where the test expects it to.
func (c *hookClock) fired(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hook != nil {
		t.Fatal("the sync never asked the clock: the hook did not run")
	}
}

// goroutine is the calling goroutine's number, from its stack's header.
func goroutine() string {
	b := make([]byte, 64)
	b = b[:goruntime.Stack(b, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(b), "goroutine "), " ")
	return id
}

func registered(f *fixture, name string) bool {
	for _, m := range f.reg.List() {
		if m.Name == name && !m.Retiring() {
			return true
		}
	}
	return false
}

func (f *fixture) sliceExists(cluster, name string) bool {
	_, err := f.kube[cluster].DiscoveryV1().EndpointSlices(ns).Get(context.Background(), name, metav1.GetOptions{})
	return err == nil
}
