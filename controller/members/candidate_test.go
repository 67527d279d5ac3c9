package members

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	mcsapifake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"
)

// hosts are fake API servers by host, each up or down, that a registry's
// members connect to.
type hosts struct {
	mu   sync.Mutex
	kube map[string]*k8sfake.Clientset
	down map[string]bool
}

func (h *hosts) connect(t *testing.T) func(name, source string, rc *rest.Config) (*Member, error) {
	return func(name, source string, rc *rest.Config) (*Member, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		kube, ok := h.kube[rc.Host]
		if !ok {
			kube = fakeMember(t).Kube.(*k8sfake.Clientset)
			h.kube[rc.Host] = kube
		}
		return New(name, source, kube, mcsapifake.NewSimpleClientset()), nil
	}
}

// ready answers for the host m connects to.
func (h *hosts) ready(_ context.Context, m *Member) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	for host, kube := range h.kube {
		if m.Kube == kube && h.down[host] {
			return fmt.Errorf("dial tcp %s: connection refused", host)
		}
	}
	return nil
}

func (h *hosts) setDown(host string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.down[host] = down
}

// A Secret edit that points a healthy member elsewhere (a typo in its
// host, another cluster's CA) is tried beside it: while the new
// configuration does not work, the member goes on as it was and the
// Secret is refused with why; once it works, the member is registered
// anew from it.
func TestWorkingMemberReplacedOnlyByOneThatWorks(t *testing.T) {
	h := &hosts{kube: map[string]*k8sfake.Clientset{}, down: map[string]bool{"https://typo.example:6443": true}}
	s := memberSecret("member1", "member1", 0, kubeconfig("https://member1.example:6443", "", "token: t"))
	hub := k8sfake.NewSimpleClientset(s)
	events := record.NewFakeRecorder(100)
	r := runRegistry(t, Options{
		Hub: hub, Namespace: "mcs-system", ProbeEvery: 10 * time.Millisecond, Ready: h.ready, Recorder: events, Connect: h.connect(t),
	}, Handlers{})
	old := registeredBy(t, r, "member1", "secret mcs-system/member1")
	eventually(t, func() error { return healthy(old) })

	typo := memberSecret("member1", "member1", 0, kubeconfig("https://typo.example:6443", "", "token: t"))
	typo.ResourceVersion = "2"
	if _, err := hub.CoreV1().Secrets("mcs-system").Update(t.Context(), typo, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	warned(t, &eventLog{rec: events}, "secret mcs-system/member1", "its new configuration does not work", "connection refused", "member1 goes on as registered")
	if got := r.get("member1"); got != old || !old.Healthy() {
		t.Fatalf("member1 is %v (healthy %v) while its Secret's new configuration does not work, want the member it was, healthy", got.Source, old.Healthy())
	}
	if err := old.Err(); err != nil {
		t.Errorf("the member on trial reported on the member: %v", err)
	}

	h.setDown("https://typo.example:6443", false) // the host exists after all
	eventually(t, func() error {
		got := r.get("member1")
		if got == old || got.Source != "secret mcs-system/member1" {
			return fmt.Errorf("member1 is %s (%p; was %p), want registered anew from the new configuration", got.Source, got, old)
		}
		return healthy(got)
	})
}

// A member that stops working while its Secret's new configuration is on
// trial is replaced by it at once, as it would have been without a trial.
func TestFailingMemberReplacedAtOnce(t *testing.T) {
	h := &hosts{kube: map[string]*k8sfake.Clientset{}, down: map[string]bool{"https://new.example:6443": true}}
	s := memberSecret("member1", "member1", 0, kubeconfig("https://member1.example:6443", "", "token: t"))
	hub := k8sfake.NewSimpleClientset(s)
	r := runRegistry(t, Options{
		Hub: hub, Namespace: "mcs-system", ProbeEvery: 10 * time.Millisecond, Ready: h.ready, Connect: h.connect(t),
	}, Handlers{})
	old := registeredBy(t, r, "member1", "secret mcs-system/member1")
	eventually(t, func() error { return healthy(old) })
	moved := memberSecret("member1", "member1", 0, kubeconfig("https://new.example:6443", "", "token: t"))
	moved.ResourceVersion = "2"
	if _, err := hub.CoreV1().Secrets("mcs-system").Update(t.Context(), moved, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if !onTrial(r, "member1") || r.get("member1") != old {
			return errors.New("member1's new configuration is not on trial beside it")
		}
		return nil
	})
	h.setDown("https://member1.example:6443", true)
	eventually(t, func() error {
		if got := r.get("member1"); got == old {
			return errors.New("member1 is still the member that stopped working")
		}
		return nil
	})
}

// A new token alone is taken up in place only once the member's API
// server takes it: a token it refuses leaves the member with the one it
// has, and the Secret is refused with why.
func TestRefusedTokenNotTakenUp(t *testing.T) {
	f := newRenewFixture(t, true, RenewOptions{Before: 7 * day, Duration: 30 * day})
	m := registeredBy(t, f.reg, "member1", "secret mcs-system/member1")
	eventually(t, func() error { return healthy(m) })
	was, _ := m.token.Token()
	f.kube.PrependReactor("list", "namespaces", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.(clienttesting.ListAction).GetListRestrictions().Labels.Empty() && a.GetNamespace() == "" {
			return true, nil, errors.New("Unauthorized")
		}
		return false, nil, nil
	})
	s := memberSecret("member1", "member1", 0, tokenKubeconfig(jwt(t0.Add(40*day))))
	if _, err := f.hub.CoreV1().Secrets("mcs-system").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	refusedNow(t, reasonInvalid, 1)
	if got, _ := m.token.Token(); got.AccessToken != was.AccessToken || f.reg.get("member1") != m {
		t.Errorf("member1 took up a token its API server refuses")
	}
}

func onTrial(r *Registry, name string) bool {
	r.decide.Lock()
	defer r.decide.Unlock()
	return r.candidates[name] != nil
}

func healthy(m *Member) error {
	if !m.Healthy() {
		return fmt.Errorf("%s (%s) is not healthy: %v", m.Name, m.Source, m.Err())
	}
	return nil
}
