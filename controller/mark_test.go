package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// The cache's mark (members.AnnotationTrimmed) is the controller's alone:
// a member that puts it on derived-<svc> does not make every write of it
// read it afresh first, and the update takes the mark off.
func TestMembersTrimmedMarkIgnored(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true)},
		m1:  {service("foo", false, t0), slice("foo", "foo-abc", 1, "10.1.0.1")},
	})
	f.sync("demo/foo")
	derived := f.serviceOf(m2, "derived-foo")
	derived.Annotations = map[string]string{members.AnnotationTrimmed: "forged by the member"}
	f.change(m2, derived, "update")
	expect(t, "the mark added", f.sync("demo/foo"), writes{})

	f.kube[m2].ClearActions()
	svc := service("foo", false, t0)
	svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9090, TargetPort: intstr.FromInt32(9090)})
	f.change(m1, svc, "update")
	if got := f.sync("demo/foo")[m2]; !slices.Contains(got, "update services demo/derived-foo") {
		t.Fatalf("writes into %s %v, want derived-foo updated", m2, got)
	}
	for _, a := range f.kube[m2].Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "services" {
			t.Errorf("derived-foo read afresh before its update (%v): the member's mark was honoured", a)
		}
	}
	if _, marked := f.serviceOf(m2, "derived-foo").Annotations[members.AnnotationTrimmed]; marked {
		t.Errorf("derived-foo kept the member's mark %s through the controller's update", members.AnnotationTrimmed)
	}
}
