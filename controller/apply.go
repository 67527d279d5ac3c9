package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// applyMember writes into one member the difference between what it holds
// of the service and what the plan wants. Of the Services and
// EndpointSlices, only those carrying the managed-by label are changed or
// deleted; anything else in the way is reported and left alone. A user's
// ServiceImport is filled in, never deleted (see imports.go).
func (c *Controller) applyMember(ctx context.Context, m *members.Member, namespace, name string, plan *desired.Plan, out *outcome, seen time.Time) {
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
	w := &writer{c: c, m: m, namespace: namespace}
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

// writer writes one service's objects into one member.
type writer struct {
	c         *Controller
	m         *members.Member
	namespace string
}

func (w *writer) key(kind, name string) trackKey {
	return trackKey{cluster: w.m.Name, kind: kind, namespace: w.namespace, name: name}
}

// do runs one write and counts it.
func (w *writer) do(kind, verb string, fn func() error) error {
	err := fn()
	members.CountWrite(w.m.Name, kind, verb, err)
	if err != nil {
		return fmt.Errorf("%s %s %s/…: %w", verb, kind, w.namespace, err)
	}
	return nil
}

func ours(o metav1.Object) bool { return o.GetLabels()[api.LabelManagedBy] == api.ManagedBy }

// derivedService reports whether s is a derived Service: the controller
// labels those, and only those, with the service they stand for (before
// that label, it gave them a ServiceImport as owner, as it still does when
// the import is its own).
func derivedService(s *corev1.Service) bool {
	return s.Labels[mcsv1b1.LabelServiceName] != "" ||
		slices.ContainsFunc(s.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == mcsv1b1.ServiceImportKindName })
}

func oursSlice(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == api.ManagedBy
}

// ensureNamespace creates the service's namespace when the member lacks it.
// It is never deleted: users may have put things in it since.
func (w *writer) ensureNamespace(ctx context.Context) error {
	if w.m.HasNamespace(w.namespace) || w.c.track.latest(w.key("Namespace", w.namespace), nil) != nil {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.namespace, Labels: map[string]string{api.LabelManagedBy: api.ManagedBy}}}
	return w.do("Namespace", "create", func() error {
		got, err := w.m.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		if err == nil {
			w.c.track.wrote(w.key("Namespace", w.namespace), members.Trim(got))
		}
		return err
	})
}

// service is the member's Service of that name as last seen or written.
func (w *writer) service(name string) *corev1.Service {
	return latestOf(w.c.track, w.key("Service", name), w.m.Service(w.namespace, name))
}

// propagate makes the member hold the hub's Service (want), or no
// propagated one (want nil). A Service of the user's own is left alone.
func (w *writer) propagate(ctx context.Context, name string, want *corev1.Service) error {
	have := w.service(name)
	switch {
	case have != nil && !ours(have):
		return nil // the member's own Service
	case have != nil && derivedService(have) && want == nil:
		return nil
	case have != nil && derivedService(have):
		// The derived Service of the service whose derived- name this
		// one's name is (derived-foo beside foo) keeps the name: it
		// serves foo's imported endpoints, which replacing it would cut.
		return fmt.Errorf("Service %s/%s is the derived Service of %s, which keeps the name: %w",
			w.namespace, name, strings.TrimPrefix(name, api.DerivedPrefix), errNameTaken)
	case want == nil && have == nil:
		return nil
	case want == nil:
		return w.deleteService(ctx, have)
	}
	if err := w.ensureNamespace(ctx); err != nil {
		return err
	}
	if have == nil {
		return w.createService(ctx, want)
	}
	if equality.Semantic.DeepEqual(have.Spec.Selector, want.Spec.Selector) && samePorts(have.Spec.Ports, want.Spec.Ports) &&
		desired.IsHeadless(have) == desired.IsHeadless(want) && hasLabels(have, want.Labels) {
		return nil
	}
	if desired.IsHeadless(have) != desired.IsHeadless(want) { // clusterIP is immutable
		return w.deleteService(ctx, have)
	}
	upd := have.DeepCopy()
	upd.Spec.Selector, upd.Spec.Ports = want.Spec.Selector, want.Spec.Ports
	setLabels(upd, want.Labels)
	return w.updateService(ctx, upd)
}

func (w *writer) createService(ctx context.Context, s *corev1.Service) error {
	return save(w, "Service", "create", s.Name, func() (*corev1.Service, error) {
		return w.m.Kube.CoreV1().Services(w.namespace).Create(ctx, s, metav1.CreateOptions{})
	})
}

func (w *writer) updateService(ctx context.Context, s *corev1.Service) error {
	return save(w, "Service", "update", s.Name, func() (*corev1.Service, error) {
		return w.m.Kube.CoreV1().Services(w.namespace).Update(ctx, s, metav1.UpdateOptions{})
	})
}

// save runs one create or update, counts it, and tracks what the API server
// returned until the informer delivers it.
func save[T metav1.Object](w *writer, kind, verb, name string, write func() (T, error)) error {
	return w.do(kind, verb, func() error {
		got, err := write()
		if err == nil {
			w.c.track.wrote(w.key(kind, name), members.Trim(got))
		}
		return err
	})
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
		w.c.track.deleted(w.key(kind, o.GetName()), o.GetUID())
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

// errLeftAlone: a Service of the user's holds the name derived-<name>.
var errLeftAlone = errors.New("left alone, and no slices imported")

// errNameTaken: a derived Service holds the name of a propagated one.
var errNameTaken = errors.New("not propagated")

// ensureDerived makes derived-<name>: selector-less, owned by the import
// when the import is the controller's, with the import's ports and IP
// families; headless when the import is.
func (w *writer) ensureDerived(ctx context.Context, name string, want *desired.Import, imp *mcsv1b1.ServiceImport) (*corev1.Service, error) {
	dname := api.DerivedPrefix + name
	have := w.service(dname)
	if have != nil && !ours(have) {
		return nil, fmt.Errorf("Service %s/%s exists and is not managed by %s: %w", w.namespace, dname, api.ManagedBy, errLeftAlone)
	}
	ports := make([]corev1.ServicePort, 0, len(want.Ports))
	for _, p := range want.Ports {
		ports = append(ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, AppProtocol: p.AppProtocol, Port: p.Port, TargetPort: intstr.FromInt32(p.Port)})
	}
	owner := w.importOwner(imp)
	labels := map[string]string{api.LabelManagedBy: api.ManagedBy, mcsv1b1.LabelServiceName: name, api.LabelBucket: shards.Label(w.namespace, name)}
	if have == nil {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: dname, Namespace: w.namespace, Labels: labels, OwnerReferences: owner},
			Spec: corev1.ServiceSpec{
				Type: corev1.ServiceTypeClusterIP, Ports: ports,
				IPFamilyPolicy: want.IPFamilyPolicy, IPFamilies: slices.Clone(want.IPFamilies),
			},
		}
		setTraffic(s, want.Traffic)
		if want.Headless {
			s.Spec.ClusterIP = corev1.ClusterIPNone
		}
		if err := w.createService(ctx, s); err != nil {
			return nil, err
		}
		return w.service(dname), nil
	}
	upd := have.DeepCopy()
	families, recreate := setFamilies(upd, want)
	// clusterIP and the first family are immutable; a propagated Service
	// of the name (a MultiClusterService derived-<name>'s) yields it.
	if desired.IsHeadless(have) != want.Headless || recreate || !derivedService(have) {
		if err := w.deleteService(ctx, have); err != nil {
			return nil, err
		}
		return w.ensureDerived(ctx, name, want, imp)
	}
	if !families && samePorts(have.Spec.Ports, ports) && equality.Semantic.DeepEqual(have.OwnerReferences, owner) && hasLabels(have, labels) &&
		desired.TrafficOf(have).Same(want.Traffic) {
		return have, nil
	}
	upd.Spec.Ports, upd.OwnerReferences = ports, owner
	setTraffic(upd, want.Traffic)
	setLabels(upd, labels)
	if err := w.updateService(ctx, upd); err != nil {
		return nil, err
	}
	return w.service(dname), nil
}

// setFamilies makes s's IP families what want asks (desired/families.go),
// and reports whether it changed them, or whether s must be made anew
// because its first family is another. The API server keeps the families
// a dual-stack policy gave; only the policy is compared then.
func setFamilies(s *corev1.Service, want *desired.Import) (changed, recreate bool) {
	have := ptr.Deref(s.Spec.IPFamilyPolicy, "")
	switch {
	case want.IPFamilyPolicy == nil:
		return false, false
	case *want.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack:
		if have == corev1.IPFamilyPolicyPreferDualStack || have == corev1.IPFamilyPolicyRequireDualStack {
			return false, false
		}
		s.Spec.IPFamilyPolicy = want.IPFamilyPolicy
		return true, false
	case len(s.Spec.IPFamilies) > 0 && s.Spec.IPFamilies[0] != want.IPFamilies[0]:
		return false, true
	case have == corev1.IPFamilyPolicySingleStack && len(s.Spec.IPFamilies) == 1:
		return false, false
	}
	// Single-stack again: the API server keeps the first address only.
	s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = want.IPFamilyPolicy, slices.Clone(want.IPFamilies)
	s.Spec.ClusterIPs = s.Spec.ClusterIPs[:min(1, len(s.Spec.ClusterIPs))]
	return true, false
}

// setTraffic makes s handle its traffic as t says, so that kube-proxy does
// what the import says.
func setTraffic(s *corev1.Service, t desired.Traffic) {
	s.Spec.SessionAffinity, s.Spec.SessionAffinityConfig = t.SessionAffinity, t.SessionAffinityConfig.DeepCopy()
	s.Spec.InternalTrafficPolicy, s.Spec.TrafficDistribution = t.InternalTrafficPolicy, t.TrafficDistribution
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

// importOwner is the owner of what the controller makes for an import of
// its own: deleting the import collects them. Another's import (the user's,
// another MCS implementation's) owns nothing of the controller's, so that
// deleting it never takes the controller's objects with it; those are
// deleted by the controller.
func (w *writer) importOwner(imp *mcsv1b1.ServiceImport) []metav1.OwnerReference {
	if !ours(imp) {
		return nil
	}
	return []metav1.OwnerReference{{
		APIVersion: w.m.ImportVersion(),
		Kind:       mcsv1b1.ServiceImportKindName,
		Name:       imp.Name,
		UID:        imp.UID,
	}}
}

// samePorts compares what a Service's port says to clients; the API server
// fills in the rest.
func samePorts(a, b []corev1.ServicePort) bool {
	return slices.EqualFunc(a, b, func(x, y corev1.ServicePort) bool {
		return x.Name == y.Name && x.Protocol == y.Protocol && x.Port == y.Port &&
			equality.Semantic.DeepEqual(x.AppProtocol, y.AppProtocol) &&
			(y.TargetPort == intstr.IntOrString{} || x.TargetPort == y.TargetPort)
	})
}

// syncSlices writes the imported slices that differ, and deletes the ones
// no longer wanted, except those from members whose caches have not
// synced: nothing is deleted because a source cannot be seen.
func (w *writer) syncSlices(ctx context.Context, name string, plan *desired.Plan, imp *mcsv1b1.ServiceImport, seen time.Time) error {
	owner := w.importOwner(imp)
	want := map[string]bool{}
	wrote := false
	// One slice that cannot be written (a user's in the way) holds up
	// none of the others.
	var errs []error
	for _, d := range plan.Slices {
		want[d.Name] = true
		s := d.DeepCopy()
		s.OwnerReferences = owner
		changed, err := w.applySlice(ctx, s)
		errs = append(errs, err)
		wrote = wrote || changed
	}
	for _, have := range w.m.ImportedSlices(w.namespace, name) {
		have := w.slice(have.Name)
		switch {
		case have == nil || want[have.Name]:
			continue
		case plan.IsUnknown(have.Labels[mcsv1b1.LabelSourceCluster]):
			// Kept, as its source cannot be read; a stale one is marked.
			if s := plan.Restale(have); s != nil {
				changed, err := w.applySlice(ctx, s)
				errs = append(errs, err)
				wrote = wrote || changed
			}
			continue
		}
		err := w.deleteSlice(ctx, have)
		errs = append(errs, err)
		wrote = wrote || err == nil
	}
	if wrote && !seen.IsZero() {
		propagation.Observe(time.Since(seen).Seconds())
	}
	return errors.Join(errs...)
}

func (w *writer) slice(name string) *discoveryv1.EndpointSlice {
	return latestOf(w.c.track, w.key("EndpointSlice", name), w.m.Slice(w.namespace, name))
}

func (w *writer) applySlice(ctx context.Context, want *discoveryv1.EndpointSlice) (bool, error) {
	have := w.slice(want.Name)
	client := w.m.Kube.DiscoveryV1().EndpointSlices(w.namespace)
	switch {
	case have == nil:
		return true, save(w, "EndpointSlice", "create", want.Name, func() (*discoveryv1.EndpointSlice, error) {
			return client.Create(ctx, want, metav1.CreateOptions{})
		})
	case !oursSlice(have):
		return false, fmt.Errorf("EndpointSlice %s/%s exists and is not managed by %s: left alone", w.namespace, want.Name, api.ManagedBy)
	case sameSlice(have, want):
		return false, nil
	}
	upd := have.DeepCopy()
	upd.Labels, upd.Annotations, upd.OwnerReferences = want.Labels, want.Annotations, want.OwnerReferences
	upd.AddressType, upd.Endpoints, upd.Ports = want.AddressType, want.Endpoints, want.Ports
	return true, save(w, "EndpointSlice", "update", want.Name, func() (*discoveryv1.EndpointSlice, error) {
		return client.Update(ctx, upd, metav1.UpdateOptions{})
	})
}

func sameSlice(have, want *discoveryv1.EndpointSlice) bool {
	return maps.Equal(have.Labels, want.Labels) && maps.Equal(have.Annotations, want.Annotations) &&
		have.AddressType == want.AddressType &&
		equality.Semantic.DeepEqual(have.OwnerReferences, want.OwnerReferences) &&
		equality.Semantic.DeepEqual(have.Ports, want.Ports) &&
		equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints)
}

func (w *writer) deleteSlice(ctx context.Context, s *discoveryv1.EndpointSlice) error {
	return w.drop("EndpointSlice", s, func(opts metav1.DeleteOptions) error {
		return w.m.Kube.DiscoveryV1().EndpointSlices(w.namespace).Delete(ctx, s.Name, opts)
	})
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
