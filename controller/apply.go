package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// applyMember writes into one member the difference between what it holds
// of the service and what the plan wants. Of the Services and
// EndpointSlices, only those carrying the managed-by label are changed or
// deleted; anything else in the way is reported and left alone. A user's
// ServiceImport is filled in, never deleted (see imports.go). A member
// that had not synced when the sync read its input (known false) is not
// written to either: the plan took it for unknown.
func (c *Controller) applyMember(ctx context.Context, m *members.Member, namespace, name string, plan *desired.Plan, out *outcome, seen time.Time, known bool) {
	if succ, pending := c.successor(m); succ != nil || pending {
		return // renamed: its successor writes into the cluster (rename.go)
	}
	// A member that does not answer is reported, and not written to: a
	// write would only wait for its time-out. It is synced again when it
	// answers; what it provided stays imported meanwhile.
	if ok, _ := m.Reachable(); !ok || !known || !m.Synced() {
		// An unknown member may provide: its Service is not known; and
		// one that holds the service's objects must be cleaned.
		if plan.TakesPart(m.Name) || plan.IsUnknown(m.Name) || m.Holds(namespace, name) {
			out.cannotReach(m.Name, notWritten(m))
		}
		return
	}
	// A member that hangs holds this worker for applyTimeout at most.
	ctx, cancel := context.WithTimeout(ctx, applyTimeout)
	defer cancel()
	w := c.writer(m, namespace, name, out)
	if err := w.propagate(ctx, name, plan.Propagate[m.Name]); err != nil {
		out.propagateFailed(m.Name, err)
	}
	var err error
	switch {
	case plan.Consumes(m.Name) && plan.Import != nil:
		start := time.Now()
		err = w.consume(ctx, name, plan, seen)
		syncEpsDuration.WithLabelValues(m.Name).Observe(time.Since(start).Seconds())
	case plan.Import == nil && w.providedByUnknown(name, plan):
		// Its providers here are not known (at a start, say): keep what
		// the member holds until they are.
	default:
		err = w.remove(ctx, name)
	}
	if err != nil {
		out.applyFailed(m.Name, err)
	}
}

// notWritten says why a member is not written to: it cannot be reached,
// has not synced, or synced only after the sync read its input (the
// member's change queued the service again).
func notWritten(m *members.Member) error {
	if err := m.Err(); err != nil {
		return err
	}
	return fmt.Errorf("%s had not synced its informers when this sync began", m.Name)
}

// providedByUnknown reports whether a member whose caches have not synced
// provided the service to this member when it was last written: it is
// named in the import's status.clusters, or is the source of an imported
// slice. Deleting the MultiClusterService, the last ServiceExport of a
// known provider, or the operator's leave to export it, then still cleans
// the member at once.
func (w *writer) providedByUnknown(name string, plan *desired.Plan) bool {
	if plan.Deleting || plan.Unexportable != nil {
		return false
	}
	if imp := w.serviceImport(name); imp != nil {
		for _, c := range imp.Status.Clusters {
			if plan.IsUnknown(c.Cluster) {
				return true
			}
		}
	}
	return slices.ContainsFunc(w.m.ImportedSlices(w.namespace, name), func(s *discoveryv1.EndpointSlice) bool {
		return plan.IsUnknown(s.Labels[mcsv1b1.LabelSourceCluster])
	})
}

// applyTimeout bounds the writes of one service into one member: far above
// what a healthy API server takes, short enough that a hung member does
// not hold the workers for long. The sync is retried with back-off.
const applyTimeout = 15 * time.Second

// consume makes a consumption cluster hold the ServiceImport, the derived
// Service, the provider Services and the imported slices, in that order:
// the import owns the others, and its spec.ips come from the derived
// Service.
func (w *writer) consume(ctx context.Context, name string, plan *desired.Plan, seen time.Time) error {
	if err := w.ensureNamespace(ctx); err != nil {
		return err
	}
	imp, err := w.ensureImport(ctx, name, plan)
	if err != nil {
		return err
	}
	derived, derivedErr := w.ensureDerived(ctx, name, plan.Import, imp)
	if errors.Is(derivedErr, errLeftAlone) {
		return derivedErr // slices would join the user's Service
	}
	if derivedErr != nil {
		// The API server refused derived-<name>: the import and the slices
		// are kept current all the same (the endpoints answer by name, the
		// conditions say why there is no VIP), from the derived Service as
		// it is, if there is one.
		derived = w.service(api.DerivedPrefix + name)
	}
	vips, providersErr := w.syncProviders(ctx, name, plan, imp)
	if imp, err = w.fillImport(ctx, imp, plan, derived, derivedErr, vips); err != nil {
		return errors.Join(derivedErr, providersErr, err)
	}
	return errors.Join(derivedErr, providersErr, w.syncSlices(ctx, name, plan, imp, seen))
}

// remove deletes what the controller made for the service in a member that
// no longer consumes it, in the reverse order of consume: the slices, the
// provider and derived Services, the import. A user's ServiceImport stays, emptied.
func (w *writer) remove(ctx context.Context, name string) error {
	if err := w.removeSlices(ctx, name); err != nil {
		return err
	}
	if err := w.removeProviders(ctx, name); err != nil {
		return err
	}
	if err := w.removeDerived(ctx, name); err != nil {
		return err
	}
	return w.removeImport(ctx, name)
}
