package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The write helpers every object's file uses: one write counted, and
// tracked until its informer delivers it (tracker.go); a delete guarded
// by the UID read. What to write, and when, is the object's file's.

// writer writes one service's objects into one member. It remembers what
// it wrote in track, and what the member's CRDs drop in its memberState;
// out is the outcome of the member's writes.
type writer struct {
	track     *tracker
	perMember *memberStates
	m         *members.Member
	namespace string
	svcKey    string // the service's namespace/name
	out       *outcome
	// createNamespaces: the controller may create the service's namespace.
	createNamespaces bool
}

func (c *Controller) writer(m *members.Member, namespace, name string, out *outcome) *writer {
	return &writer{track: c.track, perMember: c.perMember, m: m, namespace: namespace, svcKey: namespace + "/" + name, out: out, createNamespaces: c.opts.CreateNamespaces}
}

func (w *writer) key(kind, name string) trackKey {
	return trackKey{cluster: w.m.Name, kind: kind, namespace: w.namespace, name: name}
}

// do runs one write and counts it.
func (w *writer) do(kind, verb string, fn func() error) error {
	w.out.writing()
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

// hubWrote counts one write of the hub's object o, what names it in an
// error, and tracks what the API server returned (got; nil: o deleted)
// until the informer delivers it. service is the key of the service the
// write was for.
func hubWrote(t *tracker, k trackKey, o, got metav1.Object, service, verb, what string, err error) error {
	members.CountWrite("hub", k.kind, verb, err)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, what, err)
	}
	if got == nil {
		t.deleted(k, o.GetUID())
	} else {
		t.wrote(k, got, service)
	}
	return nil
}
