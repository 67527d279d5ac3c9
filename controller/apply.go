package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// applyMember writes into one member the difference between what it holds
// of the service and what the plan wants. Of the Services and
// EndpointSlices, only those carrying the managed-by label are changed or
// deleted; anything else in the way is reported and left alone. A user's
// ServiceImport is filled in, never deleted (see imports.go).
func (c *Controller) applyMember(ctx context.Context, m *members.Member, namespace, name string, plan *desired.Plan, out *outcome, seen time.Time) {
	if succ, pending := c.successor(m); succ != nil || pending {
		return // renamed: its successor writes into the cluster (rename.go)
	}
	// A member that does not answer is reported, and not written to: a
	// write would only wait for its time-out. It is synced again when it
	// answers; what it provided stays imported meanwhile.
	if ok, _ := m.Reachable(); !ok || !m.Synced() {
		// An unknown member may provide: its Service is not known; and
		// one that holds the service's objects must be cleaned.
		if plan.TakesPart(m.Name) || plan.IsUnknown(m.Name) || m.Holds(namespace, name) {
			out.cannotReach(m.Name, m.Err())
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

// writer writes one service's objects into one member. It remembers what
// it wrote in track, and what the member's CRDs drop in pruned; out is the
// outcome of the member's writes.
type writer struct {
	track     *tracker
	pruned    *syncMap[string, prunedFields]
	m         *members.Member
	namespace string
	svcKey    string // the service's namespace/name
	out       *outcome
	// createNamespaces: the controller may create the service's namespace.
	createNamespaces bool
}

func (c *Controller) writer(m *members.Member, namespace, name string, out *outcome) *writer {
	return &writer{track: c.track, pruned: &c.prunedFields, m: m, namespace: namespace, svcKey: namespace + "/" + name, out: out, createNamespaces: c.opts.CreateNamespaces}
}

func (w *writer) key(kind, name string) trackKey {
	return trackKey{cluster: w.m.Name, kind: kind, namespace: w.namespace, name: name}
}

// do runs one write and counts it.
func (w *writer) do(kind, verb string, fn func() error) error {
	err := fn()
	members.CountWrite(w.m.Name, kind, verb, err)
	// An answer, refusals included: the API server is not hung.
	var status apierrors.APIStatus
	if err == nil || errors.As(err, &status) {
		w.out.answer()
	}
	if err != nil {
		return fmt.Errorf("%s %s %s/…: %w", verb, kind, w.namespace, err)
	}
	return nil
}

func ours(o metav1.Object) bool { return o.GetLabels()[api.LabelManagedBy] == api.ManagedBy }

// ensureNamespace creates the service's namespace when the member lacks it,
// if the controller may (Options.CreateNamespaces); else it says how to
// have it. It is never deleted: users may have put things in it since.
func (w *writer) ensureNamespace(ctx context.Context) error {
	// A Namespace is of no namespace: keyed as its informer delivers it.
	key := trackKey{cluster: w.m.Name, kind: "Namespace", name: w.namespace}
	if w.m.HasNamespace(w.namespace) || w.track.latest(key, nil) != nil {
		return nil
	}
	if !w.createNamespaces {
		return fmt.Errorf("%s has no namespace %s, and mcs-controller creates none without --create-namespaces: create it there, or see docs/operations.md, \"Namespaces in consumers\"", w.m.Name, w.namespace)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace, Labels: map[string]string{api.LabelManagedBy: api.ManagedBy}}}
	return w.do("Namespace", "create", func() error {
		got, err := w.m.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err == nil {
			w.track.wrote(key, members.Trim(got), w.svcKey)
		}
		return err
	})
}

// service is the member's Service of that name as last seen or written.
func (w *writer) service(name string) *corev1.Service {
	return latestOf(w.track, w.key("Service", name), w.m.Service(w.namespace, name))
}

func (w *writer) createService(ctx context.Context, s *corev1.Service) (*corev1.Service, error) {
	return save(w, "Service", "create", s.Name, func() (*corev1.Service, error) {
		return w.m.Kube.CoreV1().Services(w.namespace).Create(ctx, s, metav1.CreateOptions{})
	})
}

// updateService writes the member's Service have with change made to it.
func (w *writer) updateService(ctx context.Context, have *corev1.Service, change func(*corev1.Service)) (*corev1.Service, error) {
	client := w.m.Kube.CoreV1().Services(w.namespace)
	return save(w, "Service", "update", have.Name, func() (*corev1.Service, error) {
		upd, err := toChange(ctx, have, client.Get)
		if err != nil {
			return nil, err
		}
		change(upd)
		return client.Update(ctx, upd, metav1.UpdateOptions{})
	})
}

// toChange is the copy of have that a write changes and sends: have's own,
// or the object read afresh when have is a cached copy that lacks others'
// labels or annotations (members.Trimmed), which the write must send back
// as they are.
func toChange[T interface {
	metav1.Object
	DeepCopy() T
}](ctx context.Context, have T, get func(context.Context, string, metav1.GetOptions) (T, error)) (T, error) {
	if !members.Trimmed(have) {
		return have.DeepCopy(), nil
	}
	return get(ctx, have.GetName(), metav1.GetOptions{})
}

// save runs one create or update, counts it, and tracks what the API server
// returned until the informer delivers it. It returns that, as the caches
// hold it, for the sync to go on with: a read of the caches instead could
// find nothing, once a deletion by someone else was delivered and the
// tracker forgot the write. A write of an object deleted meanwhile then
// fails, and the service is synced again.
func save[T metav1.Object](w *writer, kind, verb, name string, write func() (T, error)) (T, error) {
	var kept T
	err := w.do(kind, verb, func() error {
		got, err := write()
		if err != nil {
			return err
		}
		trimmed := members.Trim(got)
		w.track.wrote(w.key(kind, name), trimmed, w.svcKey)
		kept = members.Unpacked(trimmed).(T)
		return nil
	})
	return kept, err
}

func (w *writer) deleteService(ctx context.Context, s *corev1.Service) error {
	return w.drop("Service", s, func(opts metav1.DeleteOptions) error {
		return w.m.Kube.CoreV1().Services(w.namespace).Delete(ctx, s.Name, opts)
	})
}

// drop runs one delete of o, guarded by its UID, counts it, and tracks the
// deletion until the informer delivers it; an object already gone is deleted.
func (w *writer) drop(kind string, o metav1.Object, del func(metav1.DeleteOptions) error) error {
	return w.do(kind, "delete", func() error {
		if err := del(preconditions(o)); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		w.track.deleted(w.key(kind, o.GetName()), o.GetUID())
		return nil
	})
}

func preconditions(o metav1.Object) metav1.DeleteOptions {
	uid := o.GetUID()
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// consume makes a consumption cluster hold the ServiceImport, the derived
// Service and the imported slices, in that order: the import owns the
// others, and its spec.ips come from the derived Service.
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
	if imp, err = w.fillImport(ctx, imp, plan, derived, derivedErr); err != nil {
		return errors.Join(derivedErr, err)
	}
	return errors.Join(derivedErr, w.syncSlices(ctx, name, plan, imp, seen))
}

// setLabels sets labels on s; others' labels stay.
func setLabels(s *corev1.Service, labels map[string]string) {
	s.Labels = maps.Clone(s.Labels)
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	maps.Copy(s.Labels, labels)
}

func hasLabels(o metav1.Object, labels map[string]string) bool {
	for k, v := range labels {
		if o.GetLabels()[k] != v {
			return false
		}
	}
	return true
}

// remove deletes what the controller made for the service in a member that
// no longer consumes it. A user's ServiceImport stays, emptied.
func (w *writer) remove(ctx context.Context, name string) error {
	for _, s := range w.m.ImportedSlices(w.namespace, name) {
		if s := w.slice(s.Name); s != nil {
			if err := w.deleteSlice(ctx, s); err != nil {
				return err
			}
		}
	}
	if d := w.service(api.DerivedPrefix + name); d != nil && ours(d) && derivedService(d) {
		if err := w.deleteService(ctx, d); err != nil {
			return err
		}
	}
	switch imp := w.serviceImport(name); {
	case imp == nil:
		return nil
	case ours(imp):
		return w.deleteImport(ctx, imp)
	default:
		return w.emptyImport(ctx, imp)
	}
}
