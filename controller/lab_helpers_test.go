//go:build lab

package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsclient "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller"
	"github.com/coredns-mcs/coredns-mcs/controller/leases"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// wait is how long the controller may take to converge in these tests:
// seconds in practice, far more under -race on a busy machine.
const wait = 60 * time.Second

// syncWait bounds the controller's first sync: a member's first list takes
// as long as what it holds, and the shared lab may hold a benchmark's
// 10,000 Services, decoded under -race.
const syncWait = 3 * time.Minute

// run starts the controller package against the lab, as mcs-controller
// does, limited to namespace ns so that tests (and a controller left
// running by make demo) stay out of each other's way. Member Secrets are
// read from ns on the hub.
func run(t *testing.T, ns string) {
	t.Helper()
	start(t, labtest.Get(t).MembersKubeconfig(t), ns)
}

// start runs the controller limited to namespaces, with the members of
// kubeconfig's contexts ("": none) and of the Secrets in the first
// namespace, until the test ends or stop.
func start(t *testing.T, kubeconfig string, namespaces ...string) (stop func()) {
	t.Helper()
	l := labtest.Get(t)
	l.InstallCRDs(t)
	hub := l.Config(t, labtest.Hub)
	reg, err := members.NewRegistry(members.Options{
		Kubeconfig: kubeconfig, Hub: l.Client(t, labtest.Hub), Namespace: namespaces[0],
		QPS: 200, Burst: 400, ProbeEvery: time.Second, Namespaces: namespaces,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := controller.New(controller.Options{
		HubKube: kubernetes.NewForConfigOrDie(hub), HubMCS: mcsclient.NewForConfigOrDie(hub),
		Members: reg, Namespaces: namespaces, Workers: 4, StaleAfter: 20 * time.Second,
		CreateNamespaces: true, // the tests make a namespace in the providers only
	})
	renewer := &leases.Renewer{Members: reg, Holder: t.Name(), Duration: 20 * time.Second, Every: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { reg.Run(ctx, c.Handlers()) })
	wg.Go(func() { renewer.Run(ctx) })
	wg.Go(func() {
		if err := c.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("controller: %v", err)
		}
	})
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			wg.Wait()
		})
	}
	t.Cleanup(stop)
	labtest.Eventually(t, syncWait, func(context.Context) error { return c.Synced() })
	return stop
}

// workload runs name in cluster: labtest.Workload.
func workload(t *testing.T, cluster, ns, name string, replicas int32, headless bool) {
	t.Helper()
	labtest.Get(t).Workload(t, cluster, ns, name, replicas, headless)
}

// readyIPs lists the addresses of cluster's pods of app name once there
// are want of them, all ready.
func readyIPs(ctx context.Context, t *testing.T, cluster, ns, name string, want int) ([]string, error) {
	return labtest.Get(t).ReadyPodIPs(ctx, t, cluster, ns, name, want)
}

// imported lists the ready addresses of the slices mcs-controller imported
// into cluster for service name, by source cluster.
func imported(ctx context.Context, t *testing.T, cluster, ns, name string) (map[string][]string, error) {
	list, err := labtest.Get(t).Client(t, cluster).DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: mcsv1b1.LabelServiceName + "=" + name + "," + discoveryv1.LabelManagedBy + "=" + api.ManagedBy,
	})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, s := range list.Items {
		src := s.Labels[mcsv1b1.LabelSourceCluster]
		if got, want := s.Labels[discoveryv1.LabelServiceName], api.DerivedPrefix+name; got != want {
			return nil, fmt.Errorf("%s: slice %s has %s=%q, want %q", cluster, s.Name, discoveryv1.LabelServiceName, got, want)
		}
		if _, ok := s.Annotations[api.AnnotationSourceGeneration]; !ok {
			return nil, fmt.Errorf("%s: slice %s has no %s annotation", cluster, s.Name, api.AnnotationSourceGeneration)
		}
		out[src] = append(out[src], []string{}...)
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				out[src] = append(out[src], e.Addresses...)
			}
		}
		sort.Strings(out[src])
	}
	return out, nil
}

// sameImports fails unless cluster's imported addresses are exactly want.
func sameImports(ctx context.Context, t *testing.T, cluster, ns, name string, want map[string][]string) error {
	got, err := imported(ctx, t, cluster, ns, name)
	if err != nil {
		return err
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		return fmt.Errorf("%s: imported %v, want %v", cluster, got, want)
	}
	return nil
}

// importsFrom checks that each consumer imports service name from provider
// alone, with exactly provider's n ready pod addresses.
func importsFrom(ctx context.Context, t *testing.T, provider string, n int, ns, name string, consumers ...string) error {
	ips, err := readyIPs(ctx, t, provider, ns, name, n)
	if err != nil {
		return err
	}
	for _, c := range consumers {
		if err := sameImports(ctx, t, c, ns, name, map[string][]string{provider: ips}); err != nil {
			return err
		}
	}
	return nil
}

func getImport(ctx context.Context, t *testing.T, cluster, ns, name string) (*mcsv1b1.ServiceImport, error) {
	return get(ctx, t, cluster, mcsv1b1.SchemeGroupVersion.WithResource("serviceimports"), ns, name, &mcsv1b1.ServiceImport{})
}

func getMCS(ctx context.Context, t *testing.T, ns, name string) (*v1alpha1.MultiClusterService, error) {
	return get(ctx, t, labtest.Hub, v1alpha1.MultiClusterServiceResource, ns, name, &v1alpha1.MultiClusterService{})
}

// get reads a custom resource of cluster into out.
func get[T any](ctx context.Context, t *testing.T, cluster string, gvr schema.GroupVersionResource, ns, name string, out *T) (*T, error) {
	u, err := labtest.Get(t).Dynamic(t, cluster).Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return out, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out)
}

// conditionsAre fails unless the MultiClusterService's conditions have
// these statuses (and, where given, reasons), for its current generation.
func conditionsAre(ctx context.Context, t *testing.T, ns, name string, want map[string]metav1.ConditionStatus) (*v1alpha1.MultiClusterService, error) {
	m, err := getMCS(ctx, t, ns, name)
	if err != nil {
		return nil, err
	}
	for typ, status := range want {
		c := meta.FindStatusCondition(m.Status.Conditions, typ)
		if c == nil || c.Status != status || c.ObservedGeneration != m.Generation {
			return m, fmt.Errorf("condition %s is %+v, want %s", typ, c, status)
		}
	}
	return m, nil
}

var allTrue = map[string]metav1.ConditionStatus{
	v1alpha1.ServiceApplied: metav1.ConditionTrue, v1alpha1.EndpointSliceCollected: metav1.ConditionTrue, v1alpha1.EndpointSliceApplied: metav1.ConditionTrue,
}

// absent fails unless cluster has neither a ServiceImport, a derived
// Service nor imported slices of service name.
func absent(ctx context.Context, t *testing.T, cluster, ns, name string) error {
	if _, err := getImport(ctx, t, cluster, ns, name); !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: ServiceImport %s: %v, want not found", cluster, name, err)
	}
	_, err := labtest.Get(t).Client(t, cluster).CoreV1().Services(ns).Get(ctx, api.DerivedPrefix+name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: Service %s%s: %v, want not found", cluster, api.DerivedPrefix, name, err)
	}
	got, err := imported(ctx, t, cluster, ns, name)
	if err != nil {
		return err
	}
	if len(got) > 0 {
		return fmt.Errorf("%s: imported slices %v, want none", cluster, got)
	}
	return nil
}
