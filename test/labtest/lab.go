package labtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsapi "github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// FieldManager owns the fields that Apply sets.
const FieldManager = "labtest"

// Scheme knows the built-in types, the MCS API's and the MultiClusterService, so that Apply takes
// typed objects of either without their TypeMeta.
var Scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		scheme.AddToScheme, mcsv1alpha1.AddToScheme, mcsv1beta1.AddToScheme, mcsapi.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}

// Lab is the running lab.
type Lab struct {
	root       string
	kubeconfig string

	// watch and watchPipe are set when this process started the lab.
	watch     *exec.Cmd
	watchPipe *os.File

	mu      sync.Mutex
	clients map[string]*clusterClients
}

type clusterClients struct {
	config  *rest.Config
	kube    kubernetes.Interface
	dynamic dynamic.Interface
	mapper  meta.ResettableRESTMapper
}

func newLab(root string) *Lab {
	l := &Lab{root: root, clients: map[string]*clusterClients{}}
	l.kubeconfig = l.out("lab", "kubeconfig")
	return l
}

// Root is the repository's top directory, which holds the lab and bin/.
func (l *Lab) Root() string { return l.root }

// Kubeconfig is the path of the lab's kubeconfig, whose contexts are the
// cluster names.
func (l *Lab) Kubeconfig() string { return l.kubeconfig }

// Config returns a copy of the REST config of cluster.
func (l *Lab) Config(t testing.TB, cluster string) *rest.Config {
	t.Helper()
	return rest.CopyConfig(l.clusterClients(t, cluster).config)
}

// Client returns a clientset for cluster.
func (l *Lab) Client(t testing.TB, cluster string) kubernetes.Interface {
	t.Helper()
	return l.clusterClients(t, cluster).kube
}

// Dynamic returns a dynamic client for cluster.
func (l *Lab) Dynamic(t testing.TB, cluster string) dynamic.Interface {
	t.Helper()
	return l.clusterClients(t, cluster).dynamic
}

func (l *Lab) clusterClients(t testing.TB, cluster string) *clusterClients {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.clients[cluster]; ok {
		return c
	}
	c, err := l.newClusterClients(cluster)
	if err != nil {
		t.Fatalf("labtest: %v", err)
	}
	l.clients[cluster] = c
	return c
}

func (l *Lab) newClusterClients(cluster string) (*clusterClients, error) {
	cfg, err := l.restConfig(cluster)
	if err != nil {
		return nil, err
	}
	// Tests create objects in bursts; the default 5 QPS would pace them.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.UserAgent = "labtest"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", cluster, err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &clusterClients{config: cfg, kube: kube, dynamic: dyn, mapper: mapper}, nil
}

// Apply server-side applies objects to cluster, forcing ownership of their
// fields. Objects are typed (of Scheme) or unstructured; a namespaced object
// without a namespace goes to "default".
func (l *Lab) Apply(t testing.TB, cluster string, objects ...runtime.Object) {
	t.Helper()
	for _, obj := range objects {
		u, err := toUnstructured(obj)
		if err == nil {
			err = l.apply(t.Context(), l.clusterClients(t, cluster), u)
		}
		if err != nil {
			t.Fatalf("labtest: applying to %s: %v", cluster, err)
		}
	}
}

// ApplyMany is Apply with up to 32 objects in flight: for tests that write
// hundreds.
func (l *Lab) ApplyMany(t testing.TB, cluster string, objects ...runtime.Object) {
	t.Helper()
	c := l.clusterClients(t, cluster)
	g, ctx := errgroup.WithContext(t.Context())
	g.SetLimit(32)
	for _, obj := range objects {
		g.Go(func() error {
			u, err := toUnstructured(obj)
			if err == nil {
				err = l.apply(ctx, c, u)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatalf("labtest: applying to %s: %v", cluster, err)
	}
}

// ApplyYAML server-side applies the objects of a multi-document YAML (or
// JSON) manifest to cluster.
func (l *Lab) ApplyYAML(t testing.TB, cluster, manifest string) {
	t.Helper()
	decoder := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := decoder.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("labtest: decoding manifest for %s: %v", cluster, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		l.Apply(t, cluster, u)
	}
}

func (l *Lab) apply(ctx context.Context, c *clusterClients, u *unstructured.Unstructured) error {
	ri, err := c.resource(u)
	if err != nil {
		return err
	}
	// Apply refuses managed fields, and a resource version would make it a
	// conditional update.
	u.SetManagedFields(nil)
	u.SetResourceVersion("")
	_, err = ri.Apply(ctx, u.GetName(), u, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// resource is the dynamic client of u's resource, in u's namespace
// ("default" for a namespaced object without one, which it sets).
func (c *clusterClients) resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	mapping, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// The kind may come from a CRD created since discovery was cached.
		c.mapper.Reset()
		mapping, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(mapping.Resource), nil
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(metav1.NamespaceDefault)
	}
	return c.dynamic.Resource(mapping.Resource).Namespace(u.GetNamespace()), nil
}

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u.DeepCopy(), nil
	}
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvks[0])
	// A typed object carries an empty status and a null creation time,
	// which are not the caller's intent.
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// Namespace creates a namespace of the same fresh name, derived from the
// test's name, in each of clusters (every cluster of the lab when none is
// given), and deletes them when the test ends.
func (l *Lab) Namespace(t testing.TB, clusters ...string) string {
	t.Helper()
	name := namespaceName(t.Name())
	l.NamedNamespace(t, name, clusters...)
	return name
}

// NamedNamespace makes sure namespace name exists in each of clusters
// (every cluster of the lab when none is given), and deletes it when the
// test ends. On the hub it is labelled as an operator labels a namespace
// members may export from (api.LabelExports).
func (l *Lab) NamedNamespace(t testing.TB, name string, clusters ...string) {
	t.Helper()
	if len(clusters) == 0 {
		clusters = Clusters
	}
	for _, c := range clusters {
		client := l.Client(t, c)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if c == Hub {
			ns.Labels = map[string]string{api.LabelExports: api.ExportsAllowed}
		}
		if _, err := client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("labtest: creating namespace %s in %s: %v", name, c, err)
		}
		t.Cleanup(func() {
			// t.Context is done by the time cleanups run.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("labtest: deleting namespace %s in %s: %v", name, c, err)
			}
			if c == Hub {
				l.dropFinalizers(t, name)
			}
		})
	}
}

// dropFinalizers removes the finalizers of the MultiClusterServices left
// in a test's namespace of the hub, as an operator does when no
// controller will: most tests stop theirs before their namespace goes
// (cleanups run last first), and the namespace would stay terminating on
// the shared hub, its namespace controller retrying every resource's
// deletion, load that every later test and benchmark pays.
func (l *Lab) dropFinalizers(t testing.TB, namespace string) {
	// A test may leave a thousand: its own time, and several at once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := l.Dynamic(t, Hub).Resource(mcsapi.MultiClusterServiceResource).Namespace(namespace)
	list, err := r.List(ctx, metav1.ListOptions{})
	if err != nil {
		return // no CRD, or nothing left
	}
	var g errgroup.Group
	g.SetLimit(16)
	for _, m := range list.Items {
		if len(m.GetFinalizers()) == 0 {
			continue
		}
		g.Go(func() error {
			_, err := r.Patch(ctx, m.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("dropping the finalizers of MultiClusterService %s/%s: %w", namespace, m.GetName(), err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		t.Errorf("labtest: %v", err)
	}
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// namespaceName makes a DNS label from a test name and a random suffix.
func namespaceName(testName string) string {
	base := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	return fmt.Sprintf("%s-%05d", base, rand.IntN(100000))
}

// Eventually polls check until it returns nil, and fails the test with
// check's last error when timeout passes first.
func Eventually(t testing.TB, timeout time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true,
		func(ctx context.Context) (bool, error) {
			last = check(ctx)
			return last == nil, nil
		})
	if err != nil {
		t.Fatalf("not within %s: %v", timeout, last)
	}
}
