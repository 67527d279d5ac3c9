package controller

import (
	"context"
	"errors"
	"slices"

	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// The provider Services of a consumption cluster (api/providers.go,
// desired/providers.go): one per provider in LocalFirst's failover order,
// whose slices (among the imported ones, imported.go) hold that
// provider's endpoints alone.

// syncProviders makes a provider Service for each of plan.Providers, and
// returns their VIPs for the import (api.AnnotationProviderVIPs); it
// deletes the service's others, but for those of providers whose caches
// have not synced: their copied slices stay too (imported.go), and the
// Service keeps routing to them. A Service of the user's in the way is
// reported and left alone, as derived-<svc> is.
func (w *writer) syncProviders(ctx context.Context, name string, plan *desired.Plan, imp *mcsv1b1.ServiceImport) (vips string, _ error) {
	owner := w.importOwner(imp)
	var errs []error
	ips := map[string][]string{}
	for _, c := range plan.Providers {
		labels := map[string]string{
			api.LabelManagedBy: api.ManagedBy, mcsv1b1.LabelServiceName: name, mcsv1b1.LabelSourceCluster: c,
			api.LabelBucket: shards.Label(w.namespace, name),
		}
		s, err := w.ensureImportService(ctx, api.ProviderService(name, c), labels, plan.Import, owner)
		errs = append(errs, err)
		if s != nil {
			ips[c] = s.Spec.ClusterIPs
		}
	}
	for _, have := range w.m.ProviderServices(w.namespace, name) {
		c := have.Labels[mcsv1b1.LabelSourceCluster]
		if slices.Contains(plan.Providers, c) || plan.IsUnknown(c) {
			continue
		}
		if have := w.service(have.Name); have != nil {
			errs = append(errs, w.deleteService(ctx, have))
		}
	}
	return api.FormatProviderVIPs(plan.Providers, ips), errors.Join(errs...)
}

// removeProviders deletes the service's provider Services.
func (w *writer) removeProviders(ctx context.Context, name string) error {
	for _, s := range w.m.ProviderServices(w.namespace, name) {
		if s := w.service(s.Name); s != nil {
			if err := w.deleteService(ctx, s); err != nil {
				return err
			}
		}
	}
	return nil
}
