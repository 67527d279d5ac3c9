//go:build lab

package controller_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// Two clusters export foo through the MCS API alone, as KEP-1645 has it:
// every cluster of the clusterset gets a ServiceImport carrying the
// exported Service's session affinity, traffic policies and IP families,
// the export's exportedLabels and exportedAnnotations, its clusters and a
// Ready condition; derived-foo applies the same; both exports say Valid,
// Ready and no conflict. When member2's Service then differs in its
// session affinity, the oldest export's is kept and both exports say
// Conflict.
func TestExportsAsKEP1645(t *testing.T) {
	l := labtest.Get(t)
	ns := l.Namespace(t)
	start(t, l.MembersKubeconfig(t), ns)
	service := func(affinity corev1.ServiceAffinity) *corev1.Service {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: ns},
			Spec: corev1.ServiceSpec{
				Selector:              map[string]string{"app": "foo"},
				Ports:                 []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
				SessionAffinity:       affinity,
				InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
				TrafficDistribution:   ptr.To("PreferClose"),
			},
		}
		if affinity == corev1.ServiceAffinityClientIP {
			s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}
		return s
	}
	export := func() *mcsv1b1.ServiceExport {
		e := labtest.ServiceExport(ns, "foo")
		e.Spec.ExportedLabels, e.Spec.ExportedAnnotations = map[string]string{"team": "a"}, map[string]string{"note": "x"}
		return e
	}
	for _, c := range []string{m1, m2} {
		l.Apply(t, c, service(corev1.ServiceAffinityClientIP), export())
		time.Sleep(1100 * time.Millisecond) // member1's export is the older, by its creation second
	}

	labtest.Eventually(t, wait, func(ctx context.Context) error {
		for _, c := range labtest.Members {
			if err := importAsKEP(ctx, t, c, ns); err != nil {
				return err
			}
		}
		for _, c := range []string{m1, m2} {
			if err := exportConditions(ctx, t, c, ns, map[string]string{"Valid": "True/Valid", "Ready": "True/Exported", "Conflict": "False/NoConflicts"}); err != nil {
				return err
			}
		}
		return nil
	})

	l.Apply(t, m2, service(corev1.ServiceAffinityNone))
	labtest.Eventually(t, wait, func(ctx context.Context) error {
		for _, c := range []string{m1, m2} {
			if err := exportConditions(ctx, t, c, ns, map[string]string{"Valid": "True/Valid", "Conflict": "True/SessionAffinityConflict"}); err != nil {
				return err
			}
		}
		return importAsKEP(ctx, t, m3, ns) // the oldest export's affinity is kept
	})
}

// importAsKEP fails unless cluster's import of foo and its derived-foo say
// what member1's Service and export say.
func importAsKEP(ctx context.Context, t *testing.T, cluster, ns string) error {
	imp, err := getImport(ctx, t, cluster, ns, "foo")
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	derived, err := labtest.Get(t).Client(t, cluster).CoreV1().Services(ns).Get(ctx, api.DerivedPrefix+"foo", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	s, st := imp.Spec, imp.Status
	ready := meta.FindStatusCondition(st.Conditions, string(mcsv1b1.ServiceImportConditionReady))
	switch {
	case s.Type != mcsv1b1.ClusterSetIP || len(s.Ports) != 1 || s.Ports[0].Name != "http" || s.Ports[0].Port != 80:
		return fmt.Errorf("%s: import type %s ports %+v", cluster, s.Type, s.Ports)
	case len(s.IPs) == 0 || !slices.Equal(s.IPs, derived.Spec.ClusterIPs) || !slices.Equal(s.IPFamilies, derived.Spec.IPFamilies):
		return fmt.Errorf("%s: import ips %v families %v, want derived-foo's %v %v", cluster, s.IPs, s.IPFamilies, derived.Spec.ClusterIPs, derived.Spec.IPFamilies)
	case s.SessionAffinity != corev1.ServiceAffinityClientIP || s.SessionAffinityConfig == nil || *s.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 ||
		ptr.Deref(s.InternalTrafficPolicy, "") != corev1.ServiceInternalTrafficPolicyLocal || ptr.Deref(s.TrafficDistribution, "") != "PreferClose":
		return fmt.Errorf("%s: import traffic %s %+v %v %v", cluster, s.SessionAffinity, s.SessionAffinityConfig, s.InternalTrafficPolicy, s.TrafficDistribution)
	case derived.Spec.SessionAffinity != corev1.ServiceAffinityClientIP || *derived.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 60 ||
		// Cluster: Local would drop every connection to endpoints of no node here.
		ptr.Deref(derived.Spec.InternalTrafficPolicy, "") != corev1.ServiceInternalTrafficPolicyCluster || ptr.Deref(derived.Spec.TrafficDistribution, "") != "PreferClose":
		return fmt.Errorf("%s: derived-foo traffic %+v", cluster, derived.Spec)
	case imp.Labels["team"] != "a" || !maps.Equal(imp.Annotations, map[string]string{"note": "x"}):
		return fmt.Errorf("%s: import labels %v annotations %v", cluster, imp.Labels, imp.Annotations)
	case !slices.Equal(clusterNames(st.Clusters), []string{m1, m2}) || st.EndpointSliceObjects != mcsv1b1.EndpointSliceObjectsPresent:
		return fmt.Errorf("%s: import status %+v", cluster, st)
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != imp.Generation:
		return fmt.Errorf("%s: import Ready %+v at generation %d", cluster, ready, imp.Generation)
	}
	return nil
}

func clusterNames(cs []mcsv1b1.ClusterStatus) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Cluster)
	}
	return out
}

// exportConditions fails unless cluster's export of foo has the conditions
// want (type → status/reason), each at the export's generation.
func exportConditions(ctx context.Context, t *testing.T, cluster, ns string, want map[string]string) error {
	exp, err := get(ctx, t, cluster, mcsv1b1.SchemeGroupVersion.WithResource("serviceexports"), ns, "foo", &mcsv1b1.ServiceExport{})
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	for typ, sr := range want {
		c := meta.FindStatusCondition(exp.Status.Conditions, typ)
		if c == nil || string(c.Status)+"/"+c.Reason != sr || c.ObservedGeneration != exp.Generation {
			return fmt.Errorf("%s: export condition %s is %+v, want %s at generation %d", cluster, typ, c, sr, exp.Generation)
		}
	}
	return nil
}
