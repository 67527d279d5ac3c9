package members

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/coredns-mcs/coredns-mcs/controller/internal/hostilemember"
)

// The hostile member fixture (controller/internal/hostilemember): a
// member's API server, over TLS, registered through a member Secret as
// `kubectl mcs join` registers one. runHostile registers the members,
// hostilemember.PeakHeap measures what their answers cost the controller.

// newHostileMember serves member name's API server until the test ends.
func newHostileMember(t *testing.T, name string, s hostilemember.Script) *hostilemember.Member {
	return hostilemember.New(t, name, s)
}

// hostileMaxObjects is what the fixture's members may have held
// (--member-max-objects): a hundredth of the default, so that a member that
// passes it does within seconds under the race detector too.
const hostileMaxObjects = 1000

// hostileMaxBytes is what they may have held, as decoded
// (--member-max-mib): 4 MiB, for the same reason.
const hostileMaxBytes = 4 << 20

// runHostile runs a registry of the members, each registered by its
// Secret, with the bounds mcs-controller runs with by default but
// hostileMaxObjects and hostileMaxBytes, probed every 50 ms; it returns once each is
// registered.
func runHostile(t *testing.T, members ...*hostilemember.Member) *Registry {
	t.Helper()
	hub := k8sfake.NewClientset()
	for _, h := range members {
		if _, err := hub.CoreV1().Secrets("mcs-system").Create(t.Context(), memberSecret(h.Name, h.Name, 100, h.Kubeconfig()), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	none := func(string, any) {}
	r := runRegistry(t, Options{
		Hub: hub, Namespace: "mcs-system", QPS: 100, Burst: 100, ProbeEvery: 50 * time.Millisecond,
		Recorder: record.NewFakeRecorder(100), MaxObjects: hostileMaxObjects, MaxBytes: hostileMaxBytes, MaxExports: 20000,
	}, Handlers{Services: none, Slices: none, Exports: none, Imports: none})
	for _, h := range members {
		registeredBy(t, r, h.Name, "secret mcs-system/"+h.Name)
	}
	return r
}

// refusedWith waits until cluster is unreachable with an error saying
// each of want: within 30 s, as a probe that times out takes 5 s, and
// the race detector slows every decoding.
func refusedWith(t *testing.T, r *Registry, cluster string, want ...string) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m := r.get(cluster)
		ok, err := m.Reachable()
		last = fmt.Errorf("%s reachable %v, error %v; want it unreachable, saying %q", cluster, ok, err, want)
		return !ok && err != nil && containsAll(err.Error(), want), nil
	})
	if err != nil {
		t.Fatal(last)
	}
}

// healthyNow waits until cluster is healthy: reachable, its informers synced.
func healthyNow(t *testing.T, r *Registry, cluster string) {
	t.Helper()
	eventually(t, func() error {
		if m := r.get(cluster); !m.Healthy() {
			return fmt.Errorf("%s not healthy: %v", cluster, m.Err())
		}
		return nil
	})
}
