// The operations kit of the overlays: disruption budgets and spread.

package deploy_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// typed finds the rendered object of that kind and name and converts it.
func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(find(t, objs, kind, name).Object, out); err != nil {
		t.Fatalf("%s %s: %v", kind, name, err)
	}
	return out
}

// selects reports whether sel, a label selector, matches set.
func selects(t *testing.T, sel *metav1.LabelSelector, set map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	return !s.Empty() && s.Matches(labels.Set(set))
}

// A node drain evicts one replica of the controller, and of CoreDNS, at a
// time and never the last one, and is not held up by a replica that is not
// ready.
func TestDisruptionBudgets(t *testing.T) {
	for _, c := range []struct{ dir, deployment, budget string }{
		{"overlays/hub", "mcs-controller", "mcs-controller"},
		{"overlays/member1", "coredns", "coredns"},
	} {
		objs := render(t, c.dir)
		d := typed[appsv1.Deployment](t, objs, "Deployment", c.deployment)
		pdb := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", c.budget)
		replicas := int(*d.Spec.Replicas)
		unavailable, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
		if err != nil || unavailable != 1 || replicas < 2 {
			t.Errorf("%s: %d replicas, the budget lets %d (%v) be evicted at once; want 1 of at least 2", c.dir, replicas, unavailable, err)
		}
		if pdb.GetNamespace() != d.GetNamespace() || !selects(t, pdb.Spec.Selector, d.Spec.Template.Labels) {
			t.Errorf("%s: the budget %s/%s selects %v, not the pods of Deployment %s/%s (%v)",
				c.dir, pdb.GetNamespace(), pdb.GetName(), pdb.Spec.Selector, d.GetNamespace(), d.GetName(), d.Spec.Template.Labels)
		}
		if p := pdb.Spec.UnhealthyPodEvictionPolicy; p == nil || *p != policyv1.AlwaysAllow {
			t.Errorf("%s: unhealthyPodEvictionPolicy %v, want AlwaysAllow", c.dir, p)
		}
	}
}

// The controller's replicas are spread over nodes and zones, and a hub of
// one node or one zone still runs both.
func TestControllerSpread(t *testing.T) {
	d := typed[appsv1.Deployment](t, render(t, "overlays/hub"), "Deployment", "mcs-controller")
	var keys []string
	for _, c := range d.Spec.Template.Spec.TopologySpreadConstraints {
		if c.WhenUnsatisfiable != corev1.ScheduleAnyway || c.MaxSkew != 1 || !selects(t, c.LabelSelector, d.Spec.Template.Labels) {
			t.Errorf("spread over %s: maxSkew %d, %s, selector %v; want 1, ScheduleAnyway, the controller's pods",
				c.TopologyKey, c.MaxSkew, c.WhenUnsatisfiable, c.LabelSelector)
		}
		keys = append(keys, c.TopologyKey)
	}
	slices.Sort(keys)
	if want := []string{corev1.LabelHostname, corev1.LabelTopologyZone}; !slices.Equal(keys, want) {
		t.Errorf("spread over %v, want %v", keys, want)
	}
}
