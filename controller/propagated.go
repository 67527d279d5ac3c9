package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// The hub's Service of a MultiClusterService, propagated into its
// provision and consumption clusters.

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
		_, err := w.createService(ctx, want)
		return err
	}
	if equality.Semantic.DeepEqual(have.Spec.Selector, want.Spec.Selector) && samePorts(have.Spec.Ports, want.Spec.Ports) &&
		desired.IsHeadless(have) == desired.IsHeadless(want) && hasLabels(have, want.Labels) {
		return nil
	}
	if desired.IsHeadless(have) != desired.IsHeadless(want) { // clusterIP is immutable
		return w.deleteService(ctx, have)
	}
	_, err := w.updateService(ctx, have, func(s *corev1.Service) {
		s.Spec.Selector, s.Spec.Ports = want.Spec.Selector, want.Spec.Ports
		setLabels(s, want.Labels)
	})
	return err
}

// errNameTaken: a derived Service holds the name of a propagated one.
var errNameTaken = errors.New("not propagated")
