package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// fromSecrets registers the members by Secrets on the hub, as
// kubectl mcs join does, each connected to its fakes whatever its
// kubeconfig says.
func fromSecrets() option {
	return func(f *fixture) {
		f.registration = func(o *members.Options) {
			o.Members, o.Hub, o.Namespace = nil, f.hubKube, controllerNamespace
			o.Connect = func(name, source string, _ *rest.Config) (*members.Member, error) {
				return members.New(name, source, f.kube[name], f.mcs[name]), nil
			}
		}
	}
}

// joined is the hub's Secret of member cluster, reached at server with
// token.
func joined(cluster, server, token string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: controllerNamespace, Labels: map[string]string{api.LabelCluster: cluster}},
		Data: map[string][]byte{api.KeyKubeconfig: fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: %q}}]
contexts: [{name: %s, context: {cluster: c, user: u}}]
`, server, token, cluster)},
	}
}

func joinedWorld() world {
	var hubObjs []runtime.Object
	for _, c := range memberNames {
		hubObjs = append(hubObjs, joined(c, "https://"+c+".example:6443", "first"))
	}
	return world{
		hub: hubObjs,
		m1:  {ns1(), service("serve", false, t0), slice("serve", "serve-1", 1, "10.1.0.1"), export("serve", t0)},
		m2:  {ns1()},
		m3:  {ns1()},
	}
}

// rejoin writes member cluster's Secret anew, as kubectl mcs join does,
// and waits until the registry has registered the member anew.
func (f *fixture) rejoin(s *corev1.Secret) {
	f.t.Helper()
	before := f.member(s.Name)
	if _, err := f.hubKube.CoreV1().Secrets(controllerNamespace).Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.writes() // the update itself
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return f.member(s.Name) != before, nil
	})
	if err != nil {
		f.t.Fatalf("%s was not registered anew", s.Name)
	}
}

// noDeletes fails the test if any cluster got a delete.
func noDeletes(t *testing.T, what string, got map[string][]string) {
	t.Helper()
	for cluster, writes := range got {
		if i := slices.IndexFunc(writes, func(w string) bool { return strings.HasPrefix(w, "delete ") }); i >= 0 {
			t.Errorf("%s: %s got %q", what, cluster, writes[i])
		}
	}
}

// A member registered anew by its Secret (join run again after its old
// token was revoked, or any change besides the token) is a member that has
// not synced until its new informers have listed: nothing it provides is
// deleted from any consumer meanwhile, nor after. (A healthy member whose
// token alone changes is not even registered anew:
// members.TestTokenRotatedInPlace.)
func TestRegisteredAnewKeepsItsImports(t *testing.T) {
	f := newFixture(t, joinedWorld(), fromSecrets())
	f.sync("demo/serve")
	imported := func() {
		t.Helper()
		for _, c := range memberNames {
			f.sliceOf(c, "imported-member1-serve-1") // fails the test when gone
		}
	}
	imported()

	// Its old token revoked: it stops answering, and join writes a new one.
	f.setDown(m1, true)
	f.rejoin(joined(m1, "https://member1.example:6443", "second"))
	if f.member(m1).Synced() {
		t.Fatal("member1 registered anew has synced while it cannot be reached")
	}
	noDeletes(t, "while the member registered anew cannot be reached", f.sync("demo/serve"))
	f.setDown(m1, false)
	noDeletes(t, "once it answers", f.sync("demo/serve"))
	imported()

	// Healthy, but its server moved: registered anew once the new server
	// answers and lists (members/candidate.go).
	f.rejoin(joined(m1, "https://member1.other:6443", "third"))
	noDeletes(t, "right after it was registered anew", f.sync("demo/serve"))
	imported()
}
