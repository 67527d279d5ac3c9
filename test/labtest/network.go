package labtest

import (
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/coredns-mcs/coredns-mcs/test/labnet"
)

// Network fails the test unless the lab runs with its network (kube-proxy
// on each cluster's node; test/lab/README.md), or skips it, saying why,
// when this test binary is not root and so no lab of its own could have
// one either. CI runs as root: there a lab without its network fails.
func (l *Lab) Network(t testing.TB) {
	t.Helper()
	err := labnet.Check(l.out("lab"))
	switch {
	case err == nil:
	case os.Geteuid() != 0:
		t.Skipf("sends traffic through kube-proxy, which the lab runs only as root: %v", err)
	default:
		t.Fatal(err)
	}
}

// PodPort is the port the pods of Workload and StatefulSet listen on: their
// Service's port, so that an answer of pod addresses (answer endpoints)
// reaches them as the VIP does (plugin/mcs/README.md, Ports).
const PodPort = 80

// PlayPods plays the pods of app name in namespace ns of clusters on the
// lab's pods' network (labnet), each answering its Hello on PodPort, for
// the rest of the test; pods come and go with their Deployment.
func (l *Lab) PlayPods(t testing.TB, ns, name string, clusters ...string) *labnet.Servers {
	t.Helper()
	l.Network(t)
	kube := map[string]kubernetes.Interface{}
	for _, c := range clusters {
		kube[c] = l.Client(t, c)
	}
	ss := labnet.NewServers(PodPort)
	t.Cleanup(func() {
		if err := ss.Close(); err != nil {
			t.Error(err)
		}
	})
	if err := ss.Follow(t.Context(), kube, ns, "app="+name); err != nil {
		t.Fatal(err)
	}
	return ss
}
