package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

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
	w := joinedWorld()
	w[m1] = append(w[m1], kubeSystem("uid-of-member1"))
	w[m2] = append(w[m2], kubeSystem("uid-of-member2"))
	w[m3] = append(w[m3], kubeSystem("uid-of-member3"))
	f := newFixture(t, w, fromSecrets(), renamedTo(m1, "member9"))
	f.sync("demo/serve")
	vip := f.importOf(m2, "serve").Spec.IPs

	s, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Get(t.Context(), m1, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels[api.LabelCluster] = "member9"
	if _, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.writes()
	var all []string
	err = wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
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
