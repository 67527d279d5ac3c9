package members

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	mcsapifake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

// secretRegistry runs a registry of the member Secrets on a fake hub, and
// of one member made by New ("context1", as a context would be). No member
// answers its probe, so a deregistered one goes at once.
func secretRegistry(t *testing.T, objs ...runtime.Object) (*Registry, *k8sfake.Clientset, *eventLog) {
	t.Helper()
	return secretRegistryBounded(t, nil, objs...)
}

// secretRegistryBounded is secretRegistry with the operator's bounds of
// the members' exports (--export-namespaces).
func secretRegistryBounded(t *testing.T, bounds map[string][]string, objs ...runtime.Object) (*Registry, *k8sfake.Clientset, *eventLog) {
	t.Helper()
	hub := k8sfake.NewSimpleClientset(objs...)
	events := record.NewFakeRecorder(100)
	ctxMember := New("context1", "context context1 of members.kubeconfig", k8sfake.NewSimpleClientset(), mcsapifake.NewSimpleClientset())
	r := runRegistry(t, Options{
		Hub: hub, Namespace: "mcs-system", QPS: 5, Burst: 10, ProbeEvery: time.Hour,
		Ready:    func(context.Context, *Member) error { return errors.New("down") },
		Recorder: events, Members: []*Member{ctxMember}, ExportNamespaces: bounds,
	}, Handlers{})
	return r, hub, &eventLog{rec: events}
}

// runRegistry runs a registry with handlers h until the test ends, once
// it has listed the member Secrets.
func runRegistry(t *testing.T, opts Options, h Handlers) *Registry {
	t.Helper()
	r, err := NewRegistry(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, h)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	eventually(t, func() error {
		if !r.Synced() {
			return errors.New("not synced")
		}
		return nil
	})
	return r
}

func eventually(t *testing.T, cond func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err != nil {
		t.Fatal(last)
	}
}

// registeredBy waits until cluster is registered by source, and returns it.
func registeredBy(t *testing.T, r *Registry, cluster, source string) *Member {
	t.Helper()
	var got *Member
	eventually(t, func() error {
		got = r.get(cluster)
		if got == nil || got.Source != source {
			return fmt.Errorf("%s is registered by %v, want %s", cluster, got, source)
		}
		return nil
	})
	return got
}

func refusedNow(t *testing.T, reason string, want float64) {
	t.Helper()
	eventually(t, func() error {
		if got := testutil.ToFloat64(refusedGauge.WithLabelValues(reason)); got != want {
			return fmt.Errorf("mcs_member_registrations_refused{reason=%q} = %v, want %v", reason, got, want)
		}
		return nil
	})
}

// eventLog keeps the Events a FakeRecorder received, whatever order they
// came in.
type eventLog struct {
	rec  *record.FakeRecorder
	seen []string
}

// warned waits for a Warning Event that contains every one of want.
func warned(t *testing.T, events *eventLog, want ...string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		for _, e := range events.seen {
			if strings.HasPrefix(e, "Warning "+EventRefused+" ") && containsAll(e, want) {
				return
			}
		}
		select {
		case e := <-events.rec.Events:
			events.seen = append(events.seen, e)
		case <-timeout:
			t.Fatalf("no Warning Event saying %q in %q", want, events.seen)
		}
	}
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// A Secret whose kubeconfig would run a command registers a broken member
// that says why, with a Warning Event on the Secret and the metric, and the
// command never runs, also not when the member is probed.
func TestRefusedSecret(t *testing.T) {
	marker := filepath.Join(t.TempDir(), "exec-ran")
	exec := fmt.Sprintf("exec:\n  apiVersion: client.authentication.k8s.io/v1\n  interactiveMode: Never\n  command: /bin/sh\n  args: [-c, 'touch %s']", marker)
	s := memberSecret("member1", "member1", 100, kubeconfig("https://127.0.0.1:1", "", exec))
	r, _, events := secretRegistry(t, s)
	m := registeredBy(t, r, "member1", "secret mcs-system/member1")
	if _, err := m.Reachable(); err == nil || !strings.Contains(err.Error(), `users["u"].user.exec is refused`) {
		t.Errorf("member1's error is %v, want it to name the exec field", err)
	}
	warned(t, events, "secret mcs-system/member1", `users["u"].user.exec is refused`)
	refusedNow(t, reasonPlugin, 1)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the exec credential plugin ran in the controller")
	}
}

// Several registrations of one name: the context, else the Secret in use,
// else the oldest Secret holds it; every other Secret is refused and
// reported, and a member in use is never replaced nor retired by one.
func TestDuplicateSecrets(t *testing.T) {
	kc := kubeconfig("https://127.0.0.1:1", "insecure-skip-tls-verify: false", "token: abc")
	// The older Secret is listed second (by name): it still wins, as it
	// did before a restart.
	older, younger := memberSecret("z-older", "member1", 100, kc), memberSecret("a-younger", "member1", 200, kc)
	onContext := memberSecret("context1", "context1", 100, kc)
	r, hub, events := secretRegistry(t, older, younger, onContext)
	ctx := context.Background()
	secrets := hub.CoreV1().Secrets("mcs-system")

	inUse := registeredBy(t, r, "member1", "secret mcs-system/z-older")
	warned(t, events, "secret mcs-system/a-younger: cluster member1 is registered already, by secret mcs-system/z-older")
	warned(t, events, "secret mcs-system/context1: cluster context1 is registered already, by context context1", "a context always wins")
	refusedNow(t, reasonDuplicate, 2)

	// A newcomer, and a change to a refused Secret, replace nothing.
	if _, err := secrets.Create(ctx, memberSecret("newcomer", "member1", 300, kc), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	warned(t, events, "secret mcs-system/newcomer: cluster member1 is registered already")
	changed := younger.DeepCopy()
	changed.ResourceVersion, changed.Data["extra"] = "2", []byte("x")
	if _, err := secrets.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedNow(t, reasonDuplicate, 3)
	// Removing a refused Secret changes nothing either.
	if err := secrets.Delete(ctx, "newcomer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedNow(t, reasonDuplicate, 2)
	if got := r.get("member1"); got != inUse || got.Retiring() {
		t.Fatalf("member1 is %+v, want the member of z-older, not retiring", got)
	}

	// Removing the Secret in use deregisters it; the one that waited takes over.
	if err := secrets.Delete(ctx, "z-older", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	registeredBy(t, r, "member1", "secret mcs-system/a-younger")
	refusedNow(t, reasonDuplicate, 1)
	if err := secrets.Delete(ctx, "context1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedNow(t, reasonDuplicate, 0)
	registeredBy(t, r, "context1", "context context1 of members.kubeconfig")
}

// A member that joins at run time and does not answer is news once its
// first probe settles it: the controller queues nothing for a member still
// being probed, so that every service does not report it unreachable and
// then recover, and it must hear when the member is known not to answer.
func TestJoinedMemberSettles(t *testing.T) {
	hub := k8sfake.NewSimpleClientset()
	var mu sync.Mutex
	var settledOnChange []bool
	var r *Registry
	r = runRegistry(t, Options{
		Hub: hub, Namespace: "mcs-system", QPS: 5, Burst: 10, ProbeEvery: time.Hour,
		// Slow to fail, so that the registration is news before the probe.
		Ready: func(context.Context, *Member) error {
			time.Sleep(100 * time.Millisecond)
			return errors.New("down")
		},
		Recorder: record.NewFakeRecorder(100),
	}, Handlers{Changed: func(name string) {
		if name != "member1" {
			return
		}
		for _, m := range r.List() {
			if m.Name == name {
				mu.Lock()
				settledOnChange = append(settledOnChange, m.Settled())
				mu.Unlock()
			}
		}
	}})
	s := memberSecret("member1", "member1", 100, kubeconfig("https://127.0.0.1:1", "", "token: t"))
	if _, err := hub.CoreV1().Secrets("mcs-system").Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(settledOnChange, true) {
			return fmt.Errorf("changes of member1 when it was settled: %v, want one once its first probe failed", settledOnChange)
		}
		return nil
	})
}

// A bad edit of the Secret of a usable member is refused, and the member
// goes on with its last good registration; fixed, the Secret registers it
// anew.
func TestBadEditKeepsTheMember(t *testing.T) {
	good := memberSecret("member1", "member1", 100, kubeconfig("https://127.0.0.1:1", "", "token: good"))
	r, hub, events := secretRegistry(t, good)
	inUse := registeredBy(t, r, "member1", "secret mcs-system/member1")
	secrets := hub.CoreV1().Secrets("mcs-system")

	bad := memberSecret("member1", "member1", 100, kubeconfig("https://127.0.0.1:1", "", "tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token"))
	bad.ResourceVersion = "2"
	if _, err := secrets.Update(t.Context(), bad, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	warned(t, events, "secret mcs-system/member1", "tokenFile", "member1 keeps its registration from this Secret's resourceVersion")
	refusedNow(t, reasonLocalFile, 1)
	if got := r.get("member1"); got != inUse {
		t.Fatalf("member1 is %+v after a bad edit, want the member it was", got)
	}

	fixed := memberSecret("member1", "member1", 100, kubeconfig("https://127.0.0.1:1", "", "token: new"))
	fixed.ResourceVersion = "3"
	if _, err := secrets.Update(t.Context(), fixed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedNow(t, reasonLocalFile, 0)
	eventually(t, func() error {
		if got := r.get("member1"); got == inUse || got == nil || got.Kube == nil {
			return fmt.Errorf("member1 is %+v, want one registered from the fixed Secret", got)
		}
		return nil
	})
}
