// Package members keeps the registry of member clusters: where each is
// reached, the informers the controller reads it through, and whether it
// can be reached now.
//
// One file per job: registry.go registers members, secrets.go decides which
// Secret registers a name, config.go makes their clients (untrusted.go
// checks a Secret's kubeconfig), probe.go is the reachability state
// machine and lifecycle.go that of the informers, caches.go the informers
// (scoped.go: one per namespace synced), trim.go what they keep of each
// object (packed.go and compress.go: held packed), read.go what the sync
// reads of them, mcs.go the typed MCS API writes, responses.go the bound
// on what a member's API server may answer, bounds.go the namespaces it
// may export from, metrics.go the counters; rotate.go takes a Secret's new
// token up in place, renew.go renews the tokens before they expire.
package members

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// Handlers receive the events of every member's informers. They are called
// with the member's name so that one handler serves them all.
type Handlers struct {
	Services, Slices, Exports, Imports func(cluster string, obj any)
	// Delivered is told first of every object the informers deliver
	// (Namespaces too), by kind, with
	// gone for a deletion. It reports whether the object is the echo of
	// the controller's own write, which the kind's handler is then not
	// called for. Optional.
	Delivered func(cluster, kind string, obj metav1.Object, gone bool) (echo bool)
	// Allowed reports whether m may export namespace/name at all: an
	// export it may not make counts against no quota (quota.go). Optional:
	// nil allows every export. When what it says of a namespace changes,
	// Member.RecountExports must be told.
	Allowed func(m *Member, namespace, name string) bool
	// Changed is called when a member is added, removed, replaced, syncs,
	// or becomes reachable or unreachable.
	Changed func(cluster string)
}

// Member is one registered cluster.
type Member struct {
	Name   string
	Source string // where it was registered, for messages: "context x of f", "secret ns/y"
	Kube   kubernetes.Interface
	MCS    mcsclient.Interface
	// Control is for the probe and the Leases: a client of its own, whose
	// rate limiter no burst of writes through Kube holds up.
	Control kubernetes.Interface

	// secret is the namespace/name of the Secret that registered it, at
	// resourceVersion secretRV; "" for a context, which no Secret replaces.
	secret, secretRV string
	// profile is the source of the ClusterProfile that registered it
	// (profiles.go), "" for any other; profilePrint fingerprints what
	// that registration was made of.
	profile      string
	profilePrint [sha256.Size]byte
	// candidate: a Secret's new configuration on trial (candidate.go),
	// which reports no metrics of the member's.
	candidate bool
	// identity is the cluster's (identity.go), under mu, once
	// identityKnown.
	identity      types.UID
	identityKnown bool
	// credential says when that Secret's credentials expire and whether
	// they are renewed (renew.go); token is the source of its token, which
	// a new one replaces in place, and fingerprint is of the rest of the
	// registration (rotate.go). The registry changes them under decide.
	credential  credentials.Credential
	token       *tokenSource
	fingerprint [sha256.Size]byte
	// bounds limit the namespaces it may export from (bounds.go); none:
	// every namespace. maxObjects and maxBytes bound what its informers
	// may hold (0: no bound), maxExports the exports used (quota.go). All
	// are set before it starts, never changed.
	bounds     []bound
	maxObjects int
	maxBytes   int64 // what its objects may take held (0: no bound)
	maxExports int
	// namespaces are those the controller syncs, of which its informers
	// hold the namespaced objects; none: every namespace.
	namespaces []string
	// selector is Options.Selector, or nil.
	selector func() string

	cancel context.CancelFunc
	done   chan struct{}

	// mu guards the state below, which the probe changes (probe.go; the
	// informers' by lifecycle.go alone) and the sync reads.
	mu sync.RWMutex
	// caches are the informers, nil until they started; exports and
	// imports the MCS API versions they were made for.
	caches           *caches
	exports, imports schema.GroupVersion
	probed           bool // once probed, reachable says how it went
	reachable        bool
	failures         int // probes failed in a row
	lastErr          error
	// cutOff: a probe got no answer at all (refused, timed out) since the
	// member last answered, so its informers' watches may be waiting out a
	// back-off. fresh: the caches being listed for a member that was cut
	// off and answers again.
	cutOff bool
	fresh  *caches
	// retiring: deregistered while reachable; it neither provides nor
	// consumes, and stays until what the controller wrote in it is gone.
	retiring bool
	// overflowErr: its informers held more than maxObjects; they are
	// stopped, and it counts as unreachable until overflowUntil.
	overflowErr   error
	overflowUntil time.Time
	// lastHealthy is when a probe last found it healthy, or found it no
	// longer healthy, or when it was made (UnhealthyFor); healthyAtProbe
	// whether the last probe found it healthy.
	lastHealthy    time.Time
	healthyAtProbe bool
	clock          clock.PassiveClock
}

// New makes a member reached through the given clients, Kube also being
// its Control; nothing runs until a Registry starts it. Tests build
// members over fake clientsets.
func New(name, source string, kube kubernetes.Interface, mcs mcsclient.Interface) *Member {
	return &Member{Name: name, Source: source, Kube: kube, MCS: mcs, Control: kube, lastErr: fmt.Errorf("not contacted yet"), lastHealthy: time.Now(), clock: clock.RealClock{}}
}

// brokenMember stands for a registration that cannot be used (a bad
// kubeconfig): it is never reachable, and says why.
func brokenMember(name, source string, err error) *Member {
	return &Member{Name: name, Source: source, lastErr: err, lastHealthy: time.Now(), clock: clock.RealClock{}}
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

// UnhealthyFor is how long the member has not been healthy, as of its
// probes: since the probe that found it no longer healthy, or since it was
// registered. 0 while it is healthy. Its Leases source-<member> are
// renewed while it is healthy (controller/leases), so none was renewed
// after that probe: UnhealthyFor passes their duration no sooner than
// they expire.
func (m *Member) UnhealthyFor() time.Duration {
	if m.Healthy() {
		return 0
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.clock.Since(m.lastHealthy)
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

// wantedSelector is the label selector the member's informers should list
// with now: the registry's, "" without one.
func (m *Member) wantedSelector() string {
	if m.selector == nil {
		return ""
	}
	return m.selector()
}

// current is the member's caches, nil before its informers started.
func (m *Member) current() *caches {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.caches
}
