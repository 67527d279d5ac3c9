package members

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	inventoryclient "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	inventoryinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"
	inventorylisters "sigs.k8s.io/cluster-inventory-api/client/listers/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
)

// Options say how members are registered and reached.
type Options struct {
	// Kubeconfig, when set, registers one member per context, named after it.
	Kubeconfig string
	// Hub and Namespace, when set, register a member per Secret in
	// Namespace labelled api.LabelCluster, from its api.KeyKubeconfig.
	Hub       kubernetes.Interface
	Namespace string
	// QPS and Burst of every member's API client.
	QPS   float32
	Burst int
	// ProbeEvery is how often each member's API server is probed, by
	// Ready (default Readyz).
	ProbeEvery time.Duration
	Ready      ReadyFunc
	// AllowInsecureTLS accepts member Secrets whose kubeconfig skips the
	// verification of the member's server, or reaches it other than by https.
	AllowInsecureTLS bool
	// Recorder, when set, records a Warning Event on every Secret refused.
	Recorder record.EventRecorder
	// MaxObjects bounds the objects the informers of each member may hold,
	// and MaxBytes what they may take held (0: no bound): past either, the
	// member counts as unreachable.
	MaxObjects int
	MaxBytes   int64
	// MaxExports bounds the ServiceExports of each member that are used
	// (0: no bound); past it, its newest are not (quota.go).
	MaxExports int
	// Namespaces limit the namespaced objects the members' informers hold
	// to those of the namespaces the controller syncs; none: every
	// namespace.
	Namespaces []string
	// Selector, when set, is the label selector of the Services,
	// EndpointSlices and ServiceImports the members' informers list: those
	// of the services of the shards this replica holds (controller/shards).
	// When it changes, every member is listed afresh.
	Selector func() string
	// ExportNamespaces bounds, by member name, the namespaces each member
	// may export from (--export-namespaces); a member absent here is
	// bounded by its Secret's annotation only, if any.
	ExportNamespaces map[string][]string
	// Clock tells the time of probes, for how long a member has not been
	// healthy (Member.UnhealthyFor); nil: the real clock. Unit tests give
	// a fake one.
	Clock clock.PassiveClock
	// Members are members made by New, registered as they are: unit tests
	// register members over fake clientsets. Like contexts, no Secret
	// takes their names.
	Members []*Member
	// Profiles and ProfileNamespace, when set with Hub, register a member
	// per ClusterProfile in ProfileNamespace (profiles.go), reached through
	// the operator's access providers, Access (access.go).
	Profiles         inventoryclient.Interface
	ProfileNamespace string
	Access           *access.Config
	// Connect, when set, makes the clients of a member a Secret registers,
	// from its checked config: unit tests connect fake clientsets.
	Connect func(name, source string, rc *rest.Config) (*Member, error)
}

// Registry holds the members. Members come and go at run time (Secrets);
// every change is reported to Handlers.Changed.
type Registry struct {
	opts Options
	h    Handlers // set by Run

	mu      sync.RWMutex
	members map[string]*Member

	factory informers.SharedInformerFactory
	secrets cache.SharedIndexInformer
	lister  corelisters.SecretLister
	// profiles, when watched, are the ClusterProfiles (profiles.go).
	profileFactory inventoryinformers.SharedInformerFactory
	profiles       cache.SharedIndexInformer
	profileLister  inventorylisters.ClusterProfileLister
	listed         atomic.Bool // every Secret and profile of the first lists was decided on
	// decide serializes what registers members from Secrets and profiles: their events,
	// Retired, and the pass after the first list.
	decide  sync.Mutex
	refused map[string]refusalState // by Secret namespace/name, under decide
	// candidates are Secrets' configurations on trial, by cluster name,
	// under decide (candidate.go).
	candidates map[string]*candidate
	// renewals, while tokens are renewed here, is told of every member
	// registered (renew.go).
	renewals atomic.Pointer[renewer]
}

// NewRegistry reads the kubeconfig's contexts; nothing runs until Run.
func NewRegistry(opts Options) (*Registry, error) {
	if opts.Ready == nil {
		opts.Ready = Readyz
	}
	r := &Registry{opts: opts, members: map[string]*Member{}, refused: map[string]refusalState{}, candidates: map[string]*candidate{}}
	for _, m := range opts.Members {
		r.members[m.Name] = r.bounded(m)
	}
	if opts.Hub != nil {
		r.newSecretInformer()
	}
	if opts.Profiles != nil {
		if opts.Hub == nil || opts.ProfileNamespace == "" || opts.Access == nil {
			return nil, errors.New("members from ClusterProfiles need the hub, their namespace and the access providers")
		}
		r.newProfileInformer()
	}
	if opts.Kubeconfig == "" {
		return r, nil
	}
	ms, err := fromContexts(opts.Kubeconfig, opts.QPS, opts.Burst)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		r.members[m.Name] = r.bounded(m)
	}
	return r, nil
}

// bounded adds the operator's bounds of m: what it may export, how many
// objects it may make the controller hold and how much, and of which
// namespaces.
func (r *Registry) bounded(m *Member) *Member {
	m.maxObjects, m.maxBytes, m.maxExports, m.namespaces, m.selector = r.opts.MaxObjects, r.opts.MaxBytes, r.opts.MaxExports, r.opts.Namespaces, r.opts.Selector
	if r.opts.Clock != nil {
		m.clock = r.opts.Clock
		m.lastHealthy = m.clock.Now()
	}
	if namespaces, ok := r.opts.ExportNamespaces[m.Name]; ok {
		m.bounds = append(m.bounds, bound{namespaces, "--export-namespaces"})
	}
	return m
}

// Run starts every member and the Secret watch, and stops them all when
// ctx ends. Every member's events go to h.
func (r *Registry) Run(ctx context.Context, h Handlers) {
	r.mu.Lock()
	r.h = h
	for _, m := range r.members {
		m.start(r.handlers(), r.opts.ProbeEvery, r.opts.Ready)
	}
	r.mu.Unlock()
	if r.secrets != nil {
		r.watchSecrets(ctx)
	}
	<-ctx.Done()
	r.forgetRefusals()
	r.dropCandidates()
	// Stopped outside mu: a probe that ends reports its change, which
	// reads the registry, and stop waits for it.
	for _, m := range r.List() {
		m.stop()
	}
}

// List returns every member, sorted by name.
func (r *Registry) List() []*Member {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := slices.Collect(maps.Values(r.members))
	slices.SortFunc(out, func(a, b *Member) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Settled reports whether the registry knows its members and the state of
// each (see Member.Settled), and names the first member that is not settled.
func (r *Registry) Settled() (bool, string) {
	if !r.Synced() {
		return false, "the member Secrets (and ClusterProfiles) have not been listed"
	}
	for _, m := range r.List() {
		if !m.Settled() {
			return false, m.Name
		}
	}
	return true, ""
}

// Selected reports whether every member that can be reached has listed
// its objects with label selector sel.
func (r *Registry) Selected(sel string) bool {
	for _, m := range r.List() {
		if ok, _ := m.Reachable(); !ok {
			continue
		}
		if c := m.current(); c != nil && (c.selector != sel || !c.hasSynced()) {
			return false
		}
	}
	return true
}

// Synced reports whether the registry knows its members: the Secret and
// profile watches, if any, have listed, and every Secret and profile listed
// was registered or refused.
func (r *Registry) Synced() bool {
	return r.secrets == nil || r.listed.Load()
}

// remove deregisters a member. One that is healthy retires first: it stays
// until the controller has cleaned what it wrote there (Retired); one that
// cannot be reached goes at once, and what it holds stays as it is.
func (r *Registry) remove(name, source string) {
	r.mu.Lock()
	m := r.members[name]
	if m == nil || m.Source != source {
		r.mu.Unlock()
		return
	}
	if m.Healthy() {
		m.retire()
		r.mu.Unlock()
		klog.InfoS("Member deregistered: cleaning what the controller wrote there", "cluster", name, "source", source)
		r.changed(name)
		return
	}
	delete(r.members, name)
	r.mu.Unlock()
	r.drop(m)
}

// Retired removes a retiring member once the controller has cleaned it;
// a Secret that names it and waited then takes its place.
func (r *Registry) Retired(name string) {
	r.decide.Lock()
	defer r.decide.Unlock()
	r.mu.Lock()
	m := r.members[name]
	if m == nil || !m.Retiring() {
		r.mu.Unlock()
		return
	}
	delete(r.members, name)
	r.mu.Unlock()
	r.drop(m)
	if r.listed.Load() {
		r.reconcile(name)
	}
}

func (r *Registry) get(name string) *Member {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.members[name]
}

// put registers m in place of the member of that name, if any: the same
// Secret, changed.
func (r *Registry) put(m *Member) {
	r.mu.Lock()
	prev := r.members[m.Name]
	r.members[m.Name] = m
	r.mu.Unlock()
	if prev != nil {
		prev.stop()
	}
	m.start(r.handlers(), r.opts.ProbeEvery, r.opts.Ready)
	klog.InfoS("Member registered", "cluster", m.Name, "source", m.Source)
	r.registered(m)
	r.changed(m.Name)
}

// connect makes the clients of a member a Secret registers.
func (r *Registry) connect(name, source string, rc *rest.Config) (*Member, error) {
	if r.opts.Connect != nil {
		return r.opts.Connect(name, source, rc)
	}
	return fromConfig(name, source, rc, r.opts.QPS, r.opts.Burst)
}

func (r *Registry) drop(m *Member) {
	m.stop()
	reachableGauge.DeleteLabelValues(m.Name)
	objectsGauge.DeleteLabelValues(m.Name)
	objectsLimitGauge.DeleteLabelValues(m.Name)
	bytesGauge.DeleteLabelValues(m.Name)
	exportsRefusedGauge.DeleteLabelValues(m.Name)
	expiryGauge.DeleteLabelValues(m.Name)
	renewalGauge.DeleteLabelValues(m.Name)
	klog.InfoS("Member removed", "cluster", m.Name, "source", m.Source)
	r.changed(m.Name)
}

// handlers are the members' handlers: r.h, with one thing the registry
// does first when a member changes. A retiring member that can no longer
// be reached is let go, as one that cannot be reached when it is
// deregistered goes at once: nothing can clean it, what it holds stays as
// it is, and a Secret that waits for its name takes over.
func (r *Registry) handlers() Handlers {
	h := r.h
	h.Changed = func(name string) {
		m := r.get(name)
		if m != nil && m.Retiring() {
			if ok, _ := m.Reachable(); !ok {
				go r.Retired(name) // Retired stops m's probe, which calls this
			}
		}
		if m != nil && !m.Healthy() {
			go r.tried(name) // a candidate, if any, replaces it at once
		}
		r.changed(name)
	}
	return h
}

func (r *Registry) changed(name string) {
	if r.h.Changed != nil {
		r.h.Changed(name)
	}
}
