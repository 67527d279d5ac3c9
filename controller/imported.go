package controller

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// The imported EndpointSlices of a consumption cluster: a copy of each
// provider's slice, tied to derived-<svc> (desired/slices.go).

func oursSlice(s *discoveryv1.EndpointSlice) bool {
	return s.Labels[discoveryv1.LabelManagedBy] == api.ManagedBy
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
	return latestOf(w.track, w.key("EndpointSlice", name), w.m.Slice(w.namespace, name))
}

func (w *writer) applySlice(ctx context.Context, want *discoveryv1.EndpointSlice) (bool, error) {
	have := w.slice(want.Name)
	client := w.m.Kube.DiscoveryV1().EndpointSlices(w.namespace)
	switch {
	case have == nil:
		_, err := save(w, "EndpointSlice", "create", want.Name, func() (*discoveryv1.EndpointSlice, error) {
			return client.Create(ctx, want, metav1.CreateOptions{})
		})
		return true, err
	case !oursSlice(have):
		return false, fmt.Errorf("EndpointSlice %s/%s exists and is not managed by %s: left alone", w.namespace, want.Name, api.ManagedBy)
	case sameSlice(have, want):
		return false, nil
	}
	upd := have.DeepCopy()
	upd.Labels = withOwned(have.Labels, want.Labels, desired.SliceLabels)
	upd.Annotations = withOwned(have.Annotations, want.Annotations, desired.SliceAnnotations)
	upd.OwnerReferences = want.OwnerReferences
	upd.AddressType, upd.Endpoints, upd.Ports = want.AddressType, want.Endpoints, want.Ports
	_, err := save(w, "EndpointSlice", "update", want.Name, func() (*discoveryv1.EndpointSlice, error) {
		return client.Update(ctx, upd, metav1.UpdateOptions{})
	})
	return true, err
}

// sameSlice compares what the controller owns of an imported slice:
// another's labels or annotations on it (a mutating webhook's) would
// otherwise make every sync write it again.
func sameSlice(have, want *discoveryv1.EndpointSlice) bool {
	return sameOwned(have.Labels, want.Labels, desired.SliceLabels) && sameOwned(have.Annotations, want.Annotations, desired.SliceAnnotations) &&
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

// sameOwned reports whether have and want agree on the keys owned.
func sameOwned(have, want map[string]string, owned []string) bool {
	for _, k := range owned {
		h, inHave := have[k]
		w, inWant := want[k]
		if inHave != inWant || h != w {
			return false
		}
	}
	return true
}

// withOwned is have with the keys owned as want has them.
func withOwned(have, want map[string]string, owned []string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range owned {
		delete(out, k)
		if v, ok := want[k]; ok {
			out[k] = v
		}
	}
	return out
}

// removeSlices deletes the imported slices of the service.
func (w *writer) removeSlices(ctx context.Context, name string) error {
	for _, s := range w.m.ImportedSlices(w.namespace, name) {
		if s := w.slice(s.Name); s != nil {
			if err := w.deleteSlice(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}
