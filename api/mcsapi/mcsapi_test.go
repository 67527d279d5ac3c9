package mcsapi

import (
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1a1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// TestSameLayout guards the pointer casts of convert.go: every field of the
// v1alpha1 types has the name, offset and type of its v1beta1 twin.
func TestSameLayout(t *testing.T) {
	for _, pair := range [][2]any{{mcsv1a1.ServiceImport{}, mcsv1b1.ServiceImport{}}, {mcsv1a1.ServiceExport{}, mcsv1b1.ServiceExport{}}} {
		sameLayout(t, reflect.TypeOf(pair[0]), reflect.TypeOf(pair[1]), reflect.TypeOf(pair[1]).Name())
	}
}

func sameLayout(t *testing.T, a, b reflect.Type, path string) {
	t.Helper()
	if a == b {
		return
	}
	mcs := a.PkgPath() == "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1" && b.PkgPath() == "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	if a.Kind() != b.Kind() || a.Size() != b.Size() || (a.Name() != "" && !mcs) {
		t.Fatalf("%s: %s and %s differ", path, a, b)
	}
	switch a.Kind() {
	case reflect.Struct:
		if a.NumField() != b.NumField() {
			t.Fatalf("%s: %d fields in v1alpha1, %d in v1beta1", path, a.NumField(), b.NumField())
		}
		for i := range a.NumField() {
			fa, fb := a.Field(i), b.Field(i)
			if fa.Name != fb.Name || fa.Offset != fb.Offset || fa.Tag != fb.Tag {
				t.Fatalf("%s: field %d is %s in v1alpha1, %s in v1beta1", path, i, fa.Name, fb.Name)
			}
			sameLayout(t, fa.Type, fb.Type, path+"."+fa.Name)
		}
	case reflect.Pointer, reflect.Slice, reflect.Array:
		sameLayout(t, a.Elem(), b.Elem(), path+"[]")
	case reflect.Map:
		sameLayout(t, a.Key(), b.Key(), path+"{key}")
		sameLayout(t, a.Elem(), b.Elem(), path+"{}")
	case reflect.String, reflect.Int32, reflect.Int64, reflect.Bool:
	default:
		t.Fatalf("%s: %s is not compared", path, a.Kind())
	}
}

func TestConvertKeepsEveryField(t *testing.T) {
	in := &mcsv1a1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: "foo", Namespace: "ns", Labels: map[string]string{"a": "b"}},
		Spec: mcsv1a1.ServiceImportSpec{
			Ports: []mcsv1a1.ServicePort{{Name: "http", Protocol: "TCP", AppProtocol: ptr.To("h2c"), Port: 80}},
			IPs:   []string{"10.0.0.1"}, Type: mcsv1a1.ClusterSetIP, SessionAffinity: "ClientIP",
			TrafficDistribution: ptr.To("PreferClose"),
		},
		Status: mcsv1a1.ServiceImportStatus{Clusters: []mcsv1a1.ClusterStatus{{Cluster: "member1"}}},
	}
	want, _ := json.Marshal(in)
	beta := ImportToBeta(in)
	if got, _ := json.Marshal(beta); string(got) != string(want) {
		t.Errorf("ImportToBeta:\n got %s\nwant %s", got, want)
	}
	if got, _ := json.Marshal(ImportToAlpha(beta)); string(got) != string(want) {
		t.Errorf("ImportToAlpha:\n got %s\nwant %s", got, want)
	}
	exp := &mcsv1a1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: "foo"}, Status: mcsv1a1.ServiceExportStatus{Conditions: []metav1.Condition{{Type: "Valid", Status: "True"}}}}
	out, err := ToBeta(exp)
	if e, ok := out.(*mcsv1b1.ServiceExport); err != nil || !ok || e.Status.Conditions[0].Type != "Valid" {
		t.Errorf("ToBeta(export) = %#v, %v", out, err)
	}
	if got := ExportToAlpha(ExportToBeta(exp)); got != exp {
		t.Errorf("ExportToAlpha(ExportToBeta(x)) is not x")
	}
}

func TestServed(t *testing.T) {
	for _, tc := range []struct {
		name   string
		served []*metav1.APIResourceList
		want   schema.GroupVersion
		ok     bool
	}{
		{"both", []*metav1.APIResourceList{list(mcsv1a1.SchemeGroupVersion, ServiceImports), list(mcsv1b1.SchemeGroupVersion, ServiceImports)}, mcsv1b1.SchemeGroupVersion, true},
		{"v1alpha1 only", []*metav1.APIResourceList{list(mcsv1a1.SchemeGroupVersion, ServiceImports, ServiceExports)}, mcsv1a1.SchemeGroupVersion, true},
		{"v1beta1 without imports", []*metav1.APIResourceList{list(mcsv1b1.SchemeGroupVersion, ServiceExports), list(mcsv1a1.SchemeGroupVersion, ServiceImports)}, mcsv1a1.SchemeGroupVersion, true},
		{"none", nil, schema.GroupVersion{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: tc.served}}
			gv, ok, err := Served(d, ServiceImports)
			if err != nil || gv != tc.want || ok != tc.ok {
				t.Errorf("Served = %v, %v, %v; want %v, %v", gv, ok, err, tc.want, tc.ok)
			}
		})
	}
}

func list(gv schema.GroupVersion, resources ...string) *metav1.APIResourceList {
	l := &metav1.APIResourceList{GroupVersion: gv.String()}
	for _, r := range resources {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r, Namespaced: true})
	}
	return l
}
