//go:build lab

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// manyServices is how many services the restart test syncs.
const manyServices = 1000

// The controller killed (SIGKILL) in the middle of syncing 1,000 services
// leaves half-written state behind; a new one converges it, with exactly one
// ServiceImport, derived Service and imported slice per service and nothing
// else, and a restart over that unchanged world writes nothing.
func TestKilledMidSync(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t, labtest.Hub, m1, m2)
	var w sliceWorld
	for i := range manyServices {
		w.add(ns, fmt.Sprintf("svc-%d", i), fmt.Sprintf("10.10.%d.%d", 100+i/250, i%250+1))
	}
	w.apply(t)

	first := startController(t, ns)
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		n, err := count(ctx, t, "derived Services", ns)
		if err != nil {
			return err
		}
		if n < manyServices/4 {
			return fmt.Errorf("%d derived Services so far", n)
		}
		return nil
	})
	first.Kill()

	second := startController(t, ns)
	labtest.Eventually(t, 3*converge, func(ctx context.Context) error {
		for _, what := range []string{"ServiceImports", "derived Services", "imported slices"} {
			n, err := count(ctx, t, what, ns)
			if err != nil {
				return err
			}
			if n != manyServices {
				return fmt.Errorf("member2 has %d %s, want %d", n, what, manyServices)
			}
		}
		return second.idle(ctx)
	})
	if err := second.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	third := startController(t, ns)
	labtest.Eventually(t, converge, third.idle)
	if w := third.writes(t); len(w) > 0 {
		t.Errorf("a restart over an unchanged world wrote %v, want nothing", w)
	}
}

// idle is nil once the controller has synced every service at least once
// and its queue is empty.
func (c *controller) idle(ctx context.Context) error {
	m, err := getMetrics(ctx, c.metricsURL)
	if err != nil {
		return err
	}
	synced := m[series("mcs_sync_svc_duration_seconds_count", "result", "success")]
	depth := m[series("workqueue_depth", "name", "service")]
	if synced < manyServices || depth > 0 {
		return fmt.Errorf("%v services synced, %v queued", synced, depth)
	}
	return nil
}

// count counts what the controller wrote into member2's namespace ns:
// ServiceImports, derived Services or imported slices.
func count(ctx context.Context, t *testing.T, what, ns string) (int, error) {
	l := labtest.Get(t)
	managed := metav1.ListOptions{LabelSelector: api.LabelManagedBy + "=" + api.ManagedBy}
	switch what {
	case "ServiceImports":
		list, err := l.Dynamic(t, m2).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(ns).List(ctx, managed)
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	case "derived Services":
		list, err := l.Client(t, m2).CoreV1().Services(ns).List(ctx, managed)
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	case "imported slices":
		list, err := l.Client(t, m2).DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + api.ManagedBy})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	return 0, fmt.Errorf("count: nothing called %q", what)
}

// sliceWorld is services member1 provides to member2 through
// MultiClusterServices, each a Service without selector and one slice of
// one endpoint, which the test writes.
type sliceWorld struct{ inM1, onHub []runtime.Object }

func (w *sliceWorld) add(ns, name, addr string) {
	svc := labtest.Service(ns, name, false)
	svc.Spec.Selector = nil
	w.inM1 = append(w.inM1, svc, oneEndpointSlice(ns, name, addr))
	w.onHub = append(w.onHub, labtest.MultiClusterService(ns, name, api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))
}

func (w *sliceWorld) apply(t *testing.T) {
	t.Helper()
	labtest.Get(t).ApplyMany(t, m1, w.inM1...)
	labtest.Get(t).ApplyMany(t, labtest.Hub, w.onHub...)
}

// oneEndpointSlice is service name's slice with one ready endpoint, as a
// controller other than kube-controller-manager's writes it.
func oneEndpointSlice(ns, name, addr string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "e2e",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To(int32(labtest.PodPort)), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
}
