// Package members keeps the registry of member clusters: where each is
// reached, the informers the controller reads it through, and whether it
// can be reached now.
package members

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Indexes of the EndpointSlice informer, by namespace/service.
const (
	// BySourceService: the member's own slices of a service.
	BySourceService = "source-service"
	// ByImportedService: slices mcs-controller imported for a service.
	ByImportedService = "imported-service"
)

// Handlers receive the events of every member's informers. They are called
// with the member's name so that one handler serves them all.
type Handlers struct {
	Services, Slices, Exports, Imports func(cluster string, obj any)
	// Changed is called when a member is added, removed, replaced, syncs,
	// or becomes reachable or unreachable.
	Changed func(cluster string)
}

// Member is one registered cluster.
type Member struct {
	Name   string
	Source string // where it was registered, for messages: "kubeconfig context x", "secret ns/y"
	Kube   kubernetes.Interface
	Dyn    dynamic.Interface

	// Exports and Imports are the MCS API resources in the version the
	// member serves (v1beta1 preferred); set once its informers started.
	Exports, Imports schema.GroupVersionResource

	cancel context.CancelFunc
	done   chan struct{}

	// Only the probe touches these. cutOff: a probe got no answer at all
	// (refused, timed out) since the member last answered, so its
	// informers' watches may be waiting out a back-off. fresh: the caches
	// being listed for a member that was cut off and answers again.
	cutOff bool
	fresh  *caches

	mu        sync.RWMutex
	caches    *caches // nil until the informers started
	probed    bool    // once probed, reachable says how it went
	reachable bool
	failures  int // probes failed in a row
	lastErr   error
	// retiring: deregistered while reachable; it neither provides nor
	// consumes, and stays until what the controller wrote in it is gone.
	retiring bool
}

// newMember makes a member from a rest config; nothing runs until start.
func newMember(name, source string, rc *rest.Config, qps float32, burst int) (*Member, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = qps, burst
	rc.UserAgent = "mcs-controller/" + name
	kubeRC := rest.CopyConfig(rc)
	kubeRC.ContentType = runtime.ContentTypeProtobuf
	kube, err := kubernetes.NewForConfig(kubeRC)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, source, err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, source, err)
	}
	return &Member{Name: name, Source: source, Kube: kube, Dyn: dyn, lastErr: fmt.Errorf("not contacted yet")}, nil
}

// brokenMember stands for a registration that cannot be used (a bad
// kubeconfig): it is never reachable, and says why.
func brokenMember(name, source string, err error) *Member {
	return &Member{Name: name, Source: source, lastErr: err}
}

// Reachable reports whether the member answered its last probe, and the
// last error otherwise.
func (m *Member) Reachable() (bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.reachable, m.lastErr
}

// Synced reports whether the member's informers have delivered their first
// list: only then does an absent object mean the member has none.
func (m *Member) Synced() bool {
	c := m.current()
	return c != nil && c.hasSynced()
}

// Settled reports whether the member's state is known: it was probed and,
// when it answered, its informers have synced. A broken registration is
// settled: it is known never to answer.
func (m *Member) Settled() bool {
	if m.Kube == nil {
		return true
	}
	m.mu.RLock()
	probed, ok := m.probed, m.reachable
	m.mu.RUnlock()
	return probed && (!ok || m.Synced())
}

// Healthy is what a Lease source-<member> stands for: the member is
// reachable, its slices are known, and it is not retiring.
func (m *Member) Healthy() bool {
	ok, _ := m.Reachable()
	return ok && m.Synced() && !m.Retiring()
}

// Retiring reports whether the member was deregistered and is being
// cleaned: it takes part in no service any more.
func (m *Member) Retiring() bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.retiring
}

func (m *Member) retire() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.retiring = true
}

// Err says why the member is not healthy, or nil.
func (m *Member) Err() error {
	ok, err := m.Reachable()
	switch {
	case !ok:
		return fmt.Errorf("%s is unreachable (%s): %w", m.Name, m.Source, err)
	case !m.Synced():
		return fmt.Errorf("%s has not synced its informers yet", m.Name)
	}
	return nil
}

// start probes the member and, once it answers, discovers its MCS API
// version and starts its informers. It returns at once; stop ends it all.
func (m *Member) start(h Handlers, probeEvery time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	m.cancel, m.done = cancel, make(chan struct{})
	if m.Kube == nil { // broken registration: nothing to run
		close(m.done)
		return
	}
	go func() {
		defer close(m.done)
		wait.UntilWithContext(ctx, func(ctx context.Context) { m.probe(ctx, h) }, probeEvery)
	}()
}

func (m *Member) stop() {
	if m.cancel != nil {
		m.cancel()
		<-m.done
	}
}

// failureThreshold is how many probes in a row must fail before a member
// that answered counts as unreachable: an API server under load can fail
// one readiness check while it serves.
const failureThreshold = 2

// probe checks that the member's API server is ready; the first success
// starts the informers, and a success after the member was unreachable
// lists it afresh. Transitions are logged and reported to h.Changed.
func (m *Member) probe(ctx context.Context, h Handlers) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := m.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(pctx).Error()
	switch ok, _ := m.Reachable(); {
	case err != nil:
		var answered apierrors.APIStatus
		if !errors.As(err, &answered) {
			m.cutOff = true
			m.dropFresh()
		}
	case m.current() == nil:
		err = m.startInformers(ctx, h)
	case ok || !m.cutOff:
		// Reachable, or unreachable by checks it failed but answered: its
		// watches kept working.
		m.cutOff = false
	default:
		err = m.relist(ctx, h)
	}
	if ctx.Err() != nil {
		return
	}
	m.mu.Lock()
	was := m.reachable
	m.failures++
	if err == nil {
		m.failures = 0
	}
	m.reachable, m.lastErr, m.probed = err == nil || (was && m.failures < failureThreshold), err, true
	now, failures := m.reachable, m.failures
	m.mu.Unlock()
	reachable.WithLabelValues(m.Name).Set(boolGauge(now))
	switch {
	case was && !now:
		klog.ErrorS(err, "Member became unreachable", "cluster", m.Name, "source", m.Source)
	case err != nil:
		klog.V(2).ErrorS(err, "Member failed a probe", "cluster", m.Name, "source", m.Source, "inARow", failures)
	case !was:
		klog.InfoS("Member reachable", "cluster", m.Name, "source", m.Source)
	}
	if was != now && h.Changed != nil {
		h.Changed(m.Name)
	}
}

// current is the member's caches, nil before its informers started.
func (m *Member) current() *caches {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.caches
}

// startInformers discovers which MCS API version the member serves and
// starts every informer the controller reads. A member without the MCS API
// CRDs is an error here: it is retried at the next probe.
func (m *Member) startInformers(ctx context.Context, h Handlers) error {
	exports, err := m.served(mcsv1b1.ServiceExportPluralName)
	if err != nil {
		return err
	}
	imports, err := m.served(mcsv1b1.ServiceImportPluralName)
	if err != nil {
		return err
	}
	c, err := newCaches(ctx, m.Kube, m.Dyn, exports, imports)
	if err != nil {
		return err
	}
	// Readers take the caches under mu: they are published with the
	// versions they were made for.
	m.mu.Lock()
	m.caches, m.Exports, m.Imports = c, exports, imports
	m.mu.Unlock()
	if err := c.handle(m.Name, h); err != nil {
		return err
	}
	go func() {
		if cache.WaitForCacheSync(c.done, c.synced()...) {
			klog.InfoS("Member synced", "cluster", m.Name, "serviceExport", exports.Version, "serviceImport", imports.Version)
			if h.Changed != nil {
				h.Changed(m.Name)
			}
		}
	}()
	return nil
}

// relistWait is how long a probe waits for a member's fresh list before
// it says the member is still being listed; the next probe looks again.
const relistWait = 5 * time.Second

// relist brings back a member that answers again after it was unreachable
// and cut off:
// new informers list it, and replace the old ones once they have. The old
// informers would see what changed meanwhile only after client-go's watch
// back-off, up to a minute, and the member must not count as reachable
// again, nor its Lease be renewed, from what was seen before the outage.
// Handlers join after the swap, so no sync reads the old caches for the
// new informers' events.
func (m *Member) relist(ctx context.Context, h Handlers) error {
	if m.fresh == nil {
		c, err := newCaches(ctx, m.Kube, m.Dyn, m.Exports, m.Imports)
		if err != nil {
			return err
		}
		m.fresh = c
	}
	wctx, cancel := context.WithTimeout(ctx, relistWait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), m.fresh.synced()...) {
		return errors.New("listing its objects afresh after it was unreachable")
	}
	fresh := m.fresh
	m.mu.Lock()
	old := m.caches
	m.caches, m.fresh = fresh, nil
	m.mu.Unlock()
	m.cutOff = false
	old.stop()
	return fresh.handle(m.Name, h)
}

// dropFresh stops a fresh list that a failed probe interrupted: its
// informers would wait out their back-off too. It starts anew when the
// member answers.
func (m *Member) dropFresh() {
	if m.fresh != nil {
		m.fresh.stop()
		m.fresh = nil
	}
}

// served picks the MCS API version the member serves for resource.
func (m *Member) served(resource string) (schema.GroupVersionResource, error) {
	for _, gv := range []schema.GroupVersion{mcsv1b1.SchemeGroupVersion, mcsv1a1.SchemeGroupVersion} {
		list, err := m.Kube.Discovery().ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("discovering %s: %w", gv, err)
		}
		if slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource }) {
			return gv.WithResource(resource), nil
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%s.%s is not served in v1beta1 or v1alpha1: install the MCS API CRDs", resource, mcsv1b1.GroupName)
}

func handler(cluster string, fn func(string, any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { fn(cluster, obj) },
		UpdateFunc: func(_, obj any) { fn(cluster, obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			fn(cluster, obj)
		},
	}
}

// trimManagedFields drops what no sync reads and most memory goes to.
func trimManagedFields(obj any) (any, error) {
	if a, err := meta.Accessor(obj); err == nil {
		a.SetManagedFields(nil)
	}
	return obj, nil
}

// toTyped turns the dynamic informers' ServiceExports and ServiceImports
// into v1beta1 types. v1alpha1 has the same shape in every field the
// controller reads (spec.type, spec.ports, spec.ips, status), so one type
// serves members of either version.
func toTyped(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	u.SetManagedFields(nil)
	var out runtime.Object
	switch u.GetKind() {
	case mcsv1b1.ServiceExportKindName:
		out = &mcsv1b1.ServiceExport{}
	case mcsv1b1.ServiceImportKindName:
		out = &mcsv1b1.ServiceImport{}
	default:
		return obj, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, out); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return out, nil
}

func sourceServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] == api.ManagedBy {
		return nil, nil
	}
	if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
		return []string{s.Namespace + "/" + svc}, nil
	}
	return nil, nil
}

func importedServiceIndex(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok || s.Labels[discoveryv1.LabelManagedBy] != api.ManagedBy {
		return nil, nil
	}
	if svc := s.Labels[mcsv1b1.LabelServiceName]; svc != "" {
		return []string{s.Namespace + "/" + svc}, nil
	}
	return nil, nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// The readers below serve the controller's sync. They return nothing
// before the informers started.

// Service is the member's Service namespace/name, or nil.
func (m *Member) Service(namespace, name string) *corev1.Service {
	c := m.current()
	if c == nil {
		return nil
	}
	s, _ := get(c.services, namespace, name).(*corev1.Service)
	return s
}

// Export is the member's ServiceExport namespace/name, or nil.
func (m *Member) Export(namespace, name string) *mcsv1b1.ServiceExport {
	c := m.current()
	if c == nil {
		return nil
	}
	e, _ := get(c.exports, namespace, name).(*mcsv1b1.ServiceExport)
	return e
}

// Import is the member's ServiceImport namespace/name, or nil.
func (m *Member) Import(namespace, name string) *mcsv1b1.ServiceImport {
	c := m.current()
	if c == nil {
		return nil
	}
	i, _ := get(c.imports, namespace, name).(*mcsv1b1.ServiceImport)
	return i
}

// HasNamespace reports whether the member has the namespace.
func (m *Member) HasNamespace(name string) bool {
	c := m.current()
	return c != nil && get(c.namespaces, "", name) != nil
}

// Slice is the member's EndpointSlice namespace/name, or nil.
func (m *Member) Slice(namespace, name string) *discoveryv1.EndpointSlice {
	c := m.current()
	if c == nil {
		return nil
	}
	s, _ := get(c.slices, namespace, name).(*discoveryv1.EndpointSlice)
	return s
}

// SlicesOf lists the member's slices of service namespace/name by index
// (BySourceService or ByImportedService), sorted by name.
func (m *Member) SlicesOf(index, namespace, name string) []*discoveryv1.EndpointSlice {
	c := m.current()
	if c == nil {
		return nil
	}
	objs, err := c.slices.GetIndexer().ByIndex(index, namespace+"/"+name)
	if err != nil {
		return nil
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(objs))
	for _, o := range objs {
		if s, ok := o.(*discoveryv1.EndpointSlice); ok {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ImportKeys lists the keys (namespace/name) of every ServiceImport the member has.
func (m *Member) ImportKeys() []string {
	c := m.current()
	if c == nil {
		return nil
	}
	return c.imports.GetStore().ListKeys()
}

// ManagedKeys lists the services (namespace/name) of which the member
// holds an object the controller wrote: an imported slice, or a
// ServiceImport, derived or propagated Service carrying its label.
func (m *Member) ManagedKeys() []string {
	c := m.current()
	if c == nil {
		return nil
	}
	keys := c.slices.GetIndexer().ListIndexFuncValues(ByImportedService)
	for _, obj := range c.services.GetStore().List() {
		if s, ok := obj.(*corev1.Service); ok && s.Labels[api.LabelManagedBy] == api.ManagedBy {
			keys = append(keys, s.Namespace+"/"+strings.TrimPrefix(s.Name, api.DerivedPrefix))
		}
	}
	for _, obj := range c.imports.GetStore().List() {
		if i, ok := obj.(*mcsv1b1.ServiceImport); ok && i.Labels[api.LabelManagedBy] == api.ManagedBy {
			keys = append(keys, i.Namespace+"/"+i.Name)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// ExportKeys lists the keys (namespace/name) of every ServiceExport the member has.
func (m *Member) ExportKeys() []string {
	c := m.current()
	if c == nil {
		return nil
	}
	return c.exports.GetStore().ListKeys()
}

// get is the informer's object namespace/name, or nil.
func get(inf cache.SharedIndexInformer, namespace, name string) any {
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	return obj
}
