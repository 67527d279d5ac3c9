package members

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// The controller's own objects are written back from the cache: packed and
// unpacked, they are what the API server returned, managedFields and
// status aside; a reader's copy is its own; and the informers read what
// they need without unpacking.
func TestPackedKeepsOwnObjects(t *testing.T) {
	meta := metav1.ObjectMeta{
		Name: "derived-foo", Namespace: "demo", UID: "u-1", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: metav1.Unix(1700000000, 0), Finalizers: []string{"example.com/keep"},
		Labels:          map[string]string{api.LabelManagedBy: api.ManagedBy, discoveryv1.LabelManagedBy: api.ManagedBy, "team": "payments"},
		Annotations:     map[string]string{"prometheus.io/scrape": "true"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "multicluster.x-k8s.io/v1beta1", Kind: "ServiceImport", Name: "foo", UID: "u-0"}},
	}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"},
		Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}},
		IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack),
		SessionAffinity: corev1.ServiceAffinityClientIP, PublishNotReadyAddresses: true,
	}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}, Zone: ptr.To("a")}},
		Ports:     []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
	}
	imp := &mcsv1b1.ServiceImport{ObjectMeta: meta,
		Spec: mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP, IPs: []string{"10.96.0.1"}, Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		Status: mcsv1b1.ServiceImportStatus{
			Clusters:   []mcsv1b1.ClusterStatus{{Cluster: "member1"}},
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", Message: "imported from member1", LastTransitionTime: metav1.Unix(1700000001, 0), ObservedGeneration: 3}},
		},
	}
	for _, want := range []metav1.Object{svc, slice, imp} {
		cached, err := trim(deepCopy(want))
		if err != nil {
			t.Fatal(err)
		}
		c := cached.(metav1.Object)
		if c.GetNamespace() != "demo" || c.GetName() != "derived-foo" || c.GetResourceVersion() != "42" || c.GetUID() != "u-1" || c.GetLabels()["team"] != "payments" {
			t.Errorf("%T as the informers read it: %s/%s at %s, uid %s, labels %v", want, c.GetNamespace(), c.GetName(), c.GetResourceVersion(), c.GetUID(), c.GetLabels())
		}
		got := Unpacked(cached)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%T unpacked (-want +got):\n%s", want, diff)
		}
		got.(metav1.Object).GetLabels()["team"] = "changed"
		if Unpacked(cached).(metav1.Object).GetLabels()["team"] != "payments" {
			t.Errorf("%T: a reader's change reached the cache", want)
		}
		if !ours(cached) {
			t.Errorf("%T: not packed as the controller's", want)
		}
	}
}

// What does not compress is kept as it is encoded; either way it comes
// back whole.
func TestCompress(t *testing.T) {
	noise := make([]byte, 4096)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	// As long as an object is: Go 1.27's default level finds no match
	// in a few dozen bytes.
	object := `{"metadata":{"name":"svc-%d","namespace":"demo","labels":{"app":"web","team":"payments"}},"spec":{"ports":[{"name":"http","port":80,"protocol":"TCP"}],"type":"ClusterIP"}}`
	like := fmt.Appendf(nil, object, 2)
	d := newDictionary(false, fmt.Appendf(nil, object, 1))
	for _, c := range []struct {
		data []byte
		form byte
	}{{like, deflated}, {noise, stored}} {
		packed := d.compress(c.data)
		if packed[0] != c.form || c.form == deflated && len(packed) >= len(c.data) {
			t.Errorf("%d bytes packed in %d, form %d; want form %d", len(c.data), len(packed), packed[0], c.form)
		}
		var got []byte
		if err := d.decompressed(packed, func(data []byte) error { got = bytes.Clone(data); return nil }); err != nil || !bytes.Equal(got, c.data) {
			t.Errorf("form %d: unpacked %d bytes (%v), want the %d packed", c.form, len(got), err, len(c.data))
		}
	}
}

// The dictionary an object is compressed against is the sample built
// into the binary, whatever a member's API server sent first: a member
// whose huge slice became it would make every later pack and read of a
// slice cost what compressing that slice costs, for every member.
func TestDictionaryIsBuiltIn(t *testing.T) {
	huge := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: "demo", Labels: map[string]string{discoveryv1.LabelServiceName: "huge"}}}
	for i := range 20000 {
		huge.Endpoints = append(huge.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.%d.%d.%d", i>>16, i>>8&255, i&255)}})
	}
	if _, err := pack(huge, false); err != nil {
		t.Fatal(err)
	}
	for name, d := range map[string]*dictionary{
		"Service, ours": dictionaryOf[corev1.Service](true), "Service": dictionaryOf[corev1.Service](false),
		"EndpointSlice, ours": dictionaryOf[discoveryv1.EndpointSlice](true), "EndpointSlice": dictionaryOf[discoveryv1.EndpointSlice](false),
		"ServiceImport, ours": dictionaryOf[mcsv1b1.ServiceImport](true), "ServiceImport": dictionaryOf[mcsv1b1.ServiceImport](false),
		"ServiceExport": dictionaryOf[mcsv1b1.ServiceExport](false), "MultiClusterService": dictionaryOf[v1alpha1.MultiClusterService](false),
	} {
		if len(d.data) == 0 || len(d.data) > maxDictionary || d.stream == nil {
			t.Errorf("%s: a dictionary of %d bytes (stream %t), want its sample's, at most %d", name, len(d.data), d.stream != nil, maxDictionary)
		}
	}
	if d := dictionaryOf[discoveryv1.EndpointSlice](false); !bytes.Equal(d.data, sample[discoveryv1.EndpointSlice](dictionaryKey{reflect.TypeFor[discoveryv1.EndpointSlice](), false})) {
		t.Errorf("the slices' dictionary is %d bytes, not the built-in sample: a member's object became it", len(d.data))
	}
}

func deepCopy(o metav1.Object) metav1.Object {
	switch o := o.(type) {
	case *corev1.Service:
		return o.DeepCopy()
	case *discoveryv1.EndpointSlice:
		return o.DeepCopy()
	case *mcsv1b1.ServiceImport:
		return o.DeepCopy()
	}
	panic("deepCopy: unexpected type")
}

// Another's Service and EndpointSlice, never written, keep what the
// controller reads of them, and nothing else.
func TestOthersKeepWhatIsRead(t *testing.T) {
	meta := metav1.ObjectMeta{
		Name: "foo", Namespace: "demo", UID: "u-1", ResourceVersion: "7", Generation: 2, CreationTimestamp: metav1.Unix(1700000000, 0),
		Labels:          map[string]string{discoveryv1.LabelServiceName: "foo", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io", "app": "foo"},
		Annotations:     map[string]string{corev1.LastAppliedConfigAnnotation: "{}"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "foo", UID: "u-0"}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}
	kept := metav1.ObjectMeta{Name: "foo", Namespace: "demo", ResourceVersion: "7", Generation: 2, CreationTimestamp: metav1.Unix(1700000000, 0)}
	port := corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("h2c"), Port: 80}
	svc := &corev1.Service{ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", ClusterIPs: []string{"10.96.0.1"}, Selector: map[string]string{"app": "foo"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, AppProtocol: ptr.To("h2c"), Port: 80, TargetPort: intstr.FromString("web"), NodePort: 30080}},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, IPFamilyPolicy: ptr.To(corev1.IPFamilyPolicySingleStack), ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
		},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "1.2.3.4"}}}},
	}
	wantSvc := &corev1.Service{ObjectMeta: kept, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.1", Ports: []corev1.ServicePort{port},
		IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol}, InternalTrafficPolicy: ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
	}}
	endpoint := discoveryv1.Endpoint{Addresses: []string{"10.1.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true)}, Hostname: ptr.To("foo-0"), Zone: ptr.To("a")}
	full := endpoint
	full.NodeName, full.TargetRef = ptr.To("node-1"), &corev1.ObjectReference{Kind: "Pod", Name: "foo-0", Namespace: "demo", UID: "p-1"}
	full.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}}}
	ports := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}}
	slice := &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{full}, Ports: ports}
	keptSlice := kept
	keptSlice.Labels = map[string]string{discoveryv1.LabelServiceName: "foo", discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}
	wantSlice := &discoveryv1.EndpointSlice{ObjectMeta: keptSlice, AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{endpoint}, Ports: ports}

	for _, c := range []struct{ in, want metav1.Object }{{svc, wantSvc}, {slice, wantSlice}} {
		cached, err := trim(c.in)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.want, Unpacked(cached)); diff != "" {
			t.Errorf("%T as cached (-want +got):\n%s", c.in, diff)
		}
	}
}

// Labels and annotations that anyone in the member may add to the
// controller's objects and to ServiceImports are not held past
// MaxHeldMetadata: 300 of each kind carrying 200 KiB of random
// annotations each take what their identity and the keys the controller
// reads take, and the copies are marked so that a write reads the object
// afresh.
func TestOthersMetadataNotHeld(t *testing.T) {
	ours := map[string]string{api.LabelManagedBy: api.ManagedBy, discoveryv1.LabelManagedBy: api.ManagedBy, mcsv1b1.LabelServiceName: "foo", "team": "payments"}
	var total int64
	for i := range 300 {
		noise := make([]byte, 100<<10)
		if _, err := rand.Read(noise); err != nil {
			t.Fatal(err)
		}
		meta := metav1.ObjectMeta{
			Name: fmt.Sprintf("derived-foo%d", i), Namespace: "demo", UID: "u-1", ResourceVersion: "42", Labels: ours,
			Annotations: map[string]string{"bulk": fmt.Sprintf("%x", noise), api.AnnotationStrategy: "LocalFirst", api.AnnotationFailoverOrder: strings.Repeat("x", maxHeldValue+1)},
		}
		for _, obj := range []metav1.Object{&corev1.Service{ObjectMeta: meta}, &discoveryv1.EndpointSlice{ObjectMeta: meta}, &mcsv1b1.ServiceImport{ObjectMeta: meta}} {
			cached, err := trim(obj)
			if err != nil {
				t.Fatal(err)
			}
			total += bytesOf(cached)
			c := cached.(metav1.Object)
			wantAnnotations := map[string]string{api.AnnotationStrategy: "LocalFirst", AnnotationTrimmed: c.GetAnnotations()[AnnotationTrimmed]}
			wantLabels := map[string]string{api.LabelManagedBy: api.ManagedBy, discoveryv1.LabelManagedBy: api.ManagedBy, mcsv1b1.LabelServiceName: "foo"}
			if !Trimmed(c) || !maps.Equal(c.GetAnnotations(), wantAnnotations) || !maps.Equal(c.GetLabels(), wantLabels) || c.GetUID() != "u-1" {
				t.Fatalf("%T as cached: labels %v, annotations %.100v, uid %s; want the controller's keys only, marked", obj, c.GetLabels(), c.GetAnnotations(), c.GetUID())
			}
		}
	}
	if total > 1<<20 {
		t.Errorf("900 objects with 200 KiB of annotations each take %d KiB held, want at most 1 MiB", total>>10)
	}
}
