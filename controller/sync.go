package controller

import (
	"context"
	"errors"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// work runs syncs until the queue shuts down: one key at a time, each
// retried with back-off while it fails.
func (c *Controller) work(ctx context.Context) {
	for c.next(ctx) {
	}
}

func (c *Controller) next(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	c.retireCleaned()
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	klog.ErrorS(err, "Sync failed, will retry", "service", key, "retries", c.queue.NumRequeues(key))
	c.queue.AddRateLimited(key)
	return true
}

// retireCleaned lets a retiring member go once it holds nothing the
// controller wrote in the namespaces it syncs, or, renamed, once its
// successor has synced (rename.go). Every deletion of such an
// object queues its service again, so the check after the last one sees
// the member empty.
func (c *Controller) retireCleaned() {
	for _, m := range c.opts.Members.List() {
		if !m.Retiring() {
			continue
		}
		succ, pending := c.successor(m)
		switch {
		case succ != nil && succ.Synced():
			from := m.Name
			c.perMember.of(succ.Name).renamedFrom.Store(&from)
			c.opts.Members.Retired(m.Name)
		case succ == nil && !pending && !slices.ContainsFunc(m.ManagedKeys(), c.mineKey):
			c.opts.Members.Retired(m.Name)
		}
	}
}

// sync makes every member hold what service key (namespace/name) needs:
// read the caches, compute the plan, write the difference, report.
func (c *Controller) sync(ctx context.Context, key string) (err error) {
	start := time.Now()
	defer func() { syncSvcDuration.WithLabelValues(result(err)).Observe(time.Since(start).Seconds()) }()
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller queued; retrying cannot help
	}
	var seen time.Time // zero: no source change seen
	c.perService.update(key, func(s *serviceState) { seen, s.seen = s.seen, time.Time{} })
	c.perMember.unpaced(key)

	mcs := c.hubMCSOf(namespace, name)
	if mcs != nil && mcs.DeletionTimestamp == nil && !slices.Contains(mcs.Finalizers, v1alpha1.Finalizer) {
		// Before anything is written for it; the sync goes on with the
		// object as the update returned it, rather than wait for its echo.
		if err := c.addFinalizer(ctx, mcs); err != nil {
			return err
		}
		mcs = c.hubMCSOf(namespace, name)
	}
	r := c.roster()
	in := c.input(namespace, name, mcs, r)
	c.ages.ageMembers(in)
	c.budgetEndpoints(in)
	defer c.fan.readSources(key, in)()
	plan := desired.Compute(in)
	followed := c.followed(key, in, plan)
	c.recheckStale(key, followed)
	out := outcome{}
	if plan.Import != nil {
		out.paced = c.perMember.paced(plan.Import.Clusters, c.opts.Clock.Now())
	}
	var agesErr error
	// A service no member may export (protected, its name too long)
	// imports nothing: what it imported while it was allowed goes.
	if followed.Invalid == "" || followed.Unexportable != nil {
		c.applyMembers(ctx, namespace, name, followed, &out, seen, r)
		c.reportExports(ctx, namespace, name, followed, &out, r)
		agesErr = c.ages.keep(ctx, in, followed)
	}
	if mcs != nil {
		if err := c.report(ctx, mcs, plan, &out); err != nil {
			return err
		}
	}
	if plan.Invalid != "" {
		klog.InfoS("Invalid MultiClusterService: following its last valid spec, if any", "service", key, "reason", plan.Invalid, "followed", followed != plan)
		if followed == plan {
			return nil // fixed by an update, which queues the key again
		}
	}
	return errors.Join(out.err(), agesErr)
}

// recheckStale queues the service again for when the first of its
// unhealthy providers would be stale, so that its endpoints are marked
// then (desired/stale.go) however quiet it is. Every sync asks anew:
// client-go's delaying queue keeps only the earlier of two pending adds of
// a key, so one add alone could be swallowed by an earlier one (a retry,
// another member's change), but the sync that earlier add runs asks again.
func (c *Controller) recheckStale(key string, plan *desired.Plan) {
	if c.opts.StaleAfter <= 0 {
		return
	}
	var providers []string
	if plan.Import != nil {
		providers = plan.Import.Clusters
	}
	providers = slices.Concat(providers, plan.Unknown)
	var next time.Duration
	for _, m := range c.opts.Members.List() {
		if !slices.Contains(providers, m.Name) || m.Healthy() {
			continue
		}
		if left := c.opts.StaleAfter - m.UnhealthyFor(); left > 0 && (next == 0 || left < next) {
			next = left
		}
	}
	if next > 0 {
		c.queue.AddAfter(key, next)
	}
}

// keptValid is what serviceState.lastValid keeps of a valid MultiClusterService: the
// hub cache's packed object when it is that very version, which costs
// nothing while it stays the cache's, else a copy of its spec. The sync's
// own decoded copy, kept for a fleet's thousands, would cost megabytes.
func (c *Controller) keptValid(m *v1alpha1.MultiClusterService) any {
	if o, ok := c.hub.cached(m.Namespace, m.Name).(metav1.Object); ok && o.GetResourceVersion() == m.ResourceVersion {
		return o
	}
	spec := m.Spec
	return &spec
}

// validSpec is the spec keptValid kept, the caller's own.
func validSpec(kept any) v1alpha1.MultiClusterServiceSpec {
	if m, ok := members.Unpacked(kept).(*v1alpha1.MultiClusterService); ok {
		return m.Spec // decoded afresh
	}
	return *kept.(*v1alpha1.MultiClusterServiceSpec).DeepCopy()
}

// hubMCSOf is the MultiClusterService as the hub's informer has it, or as
// this controller last wrote it if that is newer (tracker.go).
func (c *Controller) hubMCSOf(namespace, name string) *v1alpha1.MultiClusterService {
	return latestOf(c.track, mcsKey(namespace, name), c.hub.get(namespace, name))
}

// followed is the plan a sync applies: plan, or while the
// MultiClusterService's spec is invalid (a typo), the plan of its last
// valid spec, so that a typo never freezes the endpoints a service already
// serves. The last valid spec is kept in memory only: after a restart an
// invalid spec freezes the service until it is fixed.
func (c *Controller) followed(key string, in *desired.Input, plan *desired.Plan) *desired.Plan {
	switch {
	case in.MCS == nil:
		c.perService.update(key, func(s *serviceState) { s.lastValid = nil })
	case plan.Invalid == "":
		kept := c.keptValid(in.MCS)
		c.perService.update(key, func(s *serviceState) { s.lastValid = kept })
	default:
		last := c.perService.get(key).lastValid
		if last == nil {
			return plan
		}
		prev := *in
		prev.MCS = in.MCS.DeepCopy()
		prev.MCS.Spec = validSpec(last)
		if p := desired.Compute(&prev); p.Invalid == "" {
			return p
		}
	}
	return plan
}

// roster is the members one sync works with, read once as it begins: its
// input and its writes see the same members, each synced or not as it was
// then. Read afresh at each step, the registry changes under the sync (a
// rename registers the new name and its caches sync within a few probes):
// a member registered after the input was read would be written to by a
// plan that does not know it, which takes it for a member that takes no
// part and removes the service's import and derived-<svc> there; and a
// successor read as not synced for the retiring name but as synced for
// itself would put both names in one input as providers, the ages record
// made for the two and deleted at the next sync (rename.go).
type roster struct {
	members []*members.Member
	synced  map[*members.Member]bool
}

func (c *Controller) roster() roster {
	r := roster{members: c.opts.Members.List(), synced: map[*members.Member]bool{}}
	for _, m := range r.members {
		r.synced[m] = m.Synced()
	}
	return r
}

// writable is the roster's members that are still registered: a sync
// writes into no member its input did not know, nor into one that left
// since (its clean-up is another sync's, with it among the Left).
func (r roster) writable(now []*members.Member) []*members.Member {
	return slices.DeleteFunc(slices.Clone(r.members), func(m *members.Member) bool { return !slices.Contains(now, m) })
}

// input gathers what the caches hold of the service, as the roster has
// its members. A MultiClusterService being deleted counts as absent: what
// it alone caused goes away.
func (c *Controller) input(namespace, name string, mcs *v1alpha1.MultiClusterService, r roster) *desired.Input {
	in := &desired.Input{
		Namespace: namespace, Name: name, Members: map[string]desired.Member{}, Protected: c.protected(namespace, name),
		Deleting: mcs != nil && mcs.DeletionTimestamp != nil, MaxEndpoints: c.opts.MaxImportedEndpoints, MaxPorts: c.opts.MaxImportedPorts,
	}
	if mcs != nil && !in.Deleting {
		in.MCS = mcs
		in.HubService, _ = members.Unpacked(c.hubServices.Get(namespace, name)).(*corev1.Service)
	}
	present := map[string]bool{}
	for _, m := range r.members {
		c.perMember.registered.Store(m.Name, true)
		if m.Retiring() {
			// It takes part in nothing: applying the plan cleans it. Renamed
			// (or while that cannot be told yet), its slices stay until its
			// successor provides in its place (rename.go).
			if succ, pending := c.successor(m); pending || succ != nil && !r.synced[succ] {
				present[m.Name] = true
				in.Members[m.Name] = desired.Member{}
			}
			continue
		}
		present[m.Name] = true
		stale := c.opts.StaleAfter > 0 && m.UnhealthyFor() >= c.opts.StaleAfter
		if !r.synced[m] {
			in.Members[m.Name] = desired.Member{Stale: stale}
			continue
		}
		dm := c.memberInput(m, namespace, name)
		dm.Stale = stale
		in.Members[m.Name] = dm
	}
	c.perMember.registered.Range(func(name string, _ bool) bool {
		if !present[name] {
			in.Left = append(in.Left, name)
		}
		return true
	})
	slices.Sort(in.Left)
	return in
}

// memberInput is what a synced member's caches hold of the service.
func (c *Controller) memberInput(m *members.Member, namespace, name string) desired.Member {
	return desired.Member{
		Known:      true,
		Service:    sourceService(m.Service(namespace, name)),
		Export:     m.Export(namespace, name),
		Slices:     m.SourceSlices(namespace, name),
		NotAllowed: c.providerNotAllowed(m, namespace, name),
		OverQuota:  m.OverQuota(namespace, name),
	}
}

// sourceService is a member's Service as a source of endpoints: none when
// it is a derived-<svc> Service of the controller's, whose endpoints are
// other clusters' (a MultiClusterService or ServiceExport named
// derived-<svc> would import them back).
func sourceService(s *corev1.Service) *corev1.Service {
	if s != nil && ours(s) && derivedService(s) {
		return nil
	}
	return s
}

// applyMembers writes the plan into every member of the roster still
// registered at once: members are separate API servers, so a sync waits
// for the slowest, not for their sum, and for one that hangs memberWait at
// most (fanout.go).
func (c *Controller) applyMembers(ctx context.Context, namespace, name string, plan *desired.Plan, out *outcome, seen time.Time, r roster) {
	c.fan.run(namespace+"/"+name, r.writable(c.opts.Members.List()), out, func(m *members.Member, mine *outcome) {
		c.applyMember(ctx, m, namespace, name, plan, mine, seen, r.synced[m])
	})
}

func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}
