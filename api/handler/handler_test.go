package handler

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestEachUnwrapsTombstones(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	var got []any
	h := Each(func(obj any) { got = append(got, obj) })
	h.OnAdd(a, false)
	h.OnUpdate(nil, a)
	h.OnDelete(a)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a", Obj: a})
	if len(got) != 4 {
		t.Fatalf("%d calls, want 4", len(got))
	}
	for i, o := range got {
		if o != a {
			t.Errorf("call %d got %#v, want the Service", i, o)
		}
	}
}

func TestTyped(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	b := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	type call struct{ old, cur *corev1.Service }
	var got []call
	h := Typed(func(old, cur *corev1.Service) { got = append(got, call{old, cur}) })
	h.OnAdd(a, false)
	h.OnUpdate(a, b)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "b", Obj: b})
	h.OnAdd(&corev1.Pod{}, false) // another type: ignored
	want := []call{{nil, a}, {a, b}, {b, nil}}
	if len(got) != len(want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestEventsTellDeletions(t *testing.T) {
	a := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	var gone []bool
	h := Events(func(obj any, g bool) {
		if obj != a {
			t.Errorf("got %#v, want the Service", obj)
		}
		gone = append(gone, g)
	})
	h.OnAdd(a, false)
	h.OnUpdate(nil, a)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "a", Obj: a})
	if want := []bool{false, false, true}; !slices.Equal(gone, want) {
		t.Errorf("gone %v, want %v", gone, want)
	}
}
