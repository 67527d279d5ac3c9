//go:build lab

package labtest_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

func TestMain(m *testing.M) {
	labtest.Main(m)
}

const timeout = 30 * time.Second

// TestEndpointSlices checks what every later test relies on: pods of a
// Deployment become Running and Ready with addresses from their cluster's
// pod CIDR, and kube-controller-manager keeps one EndpointSlice of them.
func TestEndpointSlices(t *testing.T) {
	for cluster, podCIDR := range map[string]string{
		labtest.Member1: "10.10.0.0/16",
		labtest.Member2: "10.12.0.0/16",
	} {
		t.Run(cluster, func(t *testing.T) {
			t.Parallel()
			lab := labtest.Get(t)
			client := lab.Client(t, cluster)
			ns := lab.Namespace(t, cluster)
			lab.Workload(t, cluster, ns, "serve", 3, false)

			var ips []string
			labtest.Eventually(t, timeout, func(ctx context.Context) (err error) {
				ips, err = lab.ReadyPodIPs(ctx, t, cluster, ns, "serve", 3)
				return err
			})
			prefix := netip.MustParsePrefix(podCIDR)
			for _, ip := range ips {
				if addr, err := netip.ParseAddr(ip); err != nil || !prefix.Contains(addr) {
					t.Errorf("pod IP %s is not in %s's pod CIDR %s", ip, cluster, podCIDR)
				}
			}
			labtest.Eventually(t, timeout, func(ctx context.Context) error {
				return sliceHasExactly(ctx, client, ns, ips)
			})
			t.Logf("%s: pods %v, all in one EndpointSlice", cluster, ips)

			lab.Apply(t, cluster, labtest.Deployment(ns, "serve", 1))
			labtest.Eventually(t, timeout, func(ctx context.Context) (err error) {
				ips, err = lab.ReadyPodIPs(ctx, t, cluster, ns, "serve", 1)
				if err != nil {
					return err
				}
				return sliceHasExactly(ctx, client, ns, ips)
			})
			t.Logf("%s: scaled to 1: pod %v, alone in the EndpointSlice", cluster, ips)
		})
	}
}

// TestServiceExport checks that every member serves the MCS API.
func TestServiceExport(t *testing.T) {
	lab := labtest.Get(t)
	ns := lab.Namespace(t, labtest.Members...)
	for _, cluster := range labtest.Members {
		export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "serve", Namespace: ns}}
		lab.Apply(t, cluster, export)
		client, err := mcsclient.NewForConfig(lab.Config(t, cluster))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := client.MulticlusterV1beta1().ServiceExports(ns).Get(t.Context(), "serve", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: reading back ServiceExport %s/serve: %v", cluster, ns, err)
		}
		// Served in both versions: the plugin reads v1alpha1 too.
		if _, err := client.MulticlusterV1alpha1().ServiceExports(ns).Get(t.Context(), "serve", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: reading ServiceExport %s/serve as v1alpha1: %v", cluster, ns, err)
		}
	}
}

// sliceHasExactly checks that the serve Service has one EndpointSlice,
// written by the endpointslice controller, whose endpoints are ips, all
// ready.
func sliceHasExactly(ctx context.Context, client kubernetes.Interface, ns string, ips []string) error {
	list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=serve",
	})
	if err != nil {
		return err
	}
	if len(list.Items) != 1 {
		return fmt.Errorf("%d EndpointSlices for serve, want 1", len(list.Items))
	}
	slice := list.Items[0]
	if got := slice.Labels[discoveryv1.LabelManagedBy]; got != "endpointslice-controller.k8s.io" {
		return fmt.Errorf("EndpointSlice %s managed by %q", slice.Name, got)
	}
	var got []string
	for _, ep := range slice.Endpoints {
		if ep.Conditions.Ready == nil || !*ep.Conditions.Ready {
			return fmt.Errorf("EndpointSlice %s: endpoint %v is not ready", slice.Name, ep.Addresses)
		}
		got = append(got, ep.Addresses...)
	}
	slices.Sort(got)
	if !slices.Equal(got, ips) {
		return fmt.Errorf("EndpointSlice %s lists %v, want the pods' %v", slice.Name, got, ips)
	}
	return nil
}
