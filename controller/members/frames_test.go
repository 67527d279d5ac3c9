package members

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/watch"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
)

// The items of a list are counted as client-go will decode them, in
// protobuf and in JSON, each of its size; the objects nested in an item
// are not items.
func TestListItems(t *testing.T) {
	svc := func(name string) corev1.Service {
		return corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "a"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "a", Port: 1}, {Name: "b", Port: 2}}}}
	}
	list := &corev1.ServiceList{TypeMeta: metav1.TypeMeta{Kind: "ServiceList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "7"},
		Items: []corev1.Service{svc("a"), svc("b"), svc("c")}}
	var pb bytes.Buffer
	if err := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme).Encode(list, &pb); err != nil {
		t.Fatal(err)
	}
	js, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	var pbSizes, jsSizes []int
	for _, item := range list.Items {
		js, _ := json.Marshal(item)
		pbSizes, jsSizes = append(pbSizes, item.Size()), append(jsSizes, len(js))
	}
	for _, c := range []struct {
		name  string
		l     listItems
		data  []byte
		want  int
		sizes []int
	}{
		{"protobuf", listItems{protobuf: true}, pb.Bytes(), 3, pbSizes},
		{"JSON", listItems{}, js, 3, jsSizes},
		{"protobuf, cut", listItems{protobuf: true}, pb.Bytes()[:pb.Len()/2], 0, nil},
		{"not protobuf", listItems{protobuf: true}, js, 0, nil},
		{"JSON, empty", listItems{}, []byte(`{"kind":"ServiceList","items":[]}`), 0, nil},
	} {
		if got := c.l.count(c.data); got != c.want {
			t.Errorf("%s: %d items, want %d", c.name, got, c.want)
		}
		var sizes []int
		c.l.each(c.data, func(size, elements int) bool {
			if elements < 3 { // its metadata, its spec and the spec's ports at least
				t.Errorf("%s: an item of %d values", c.name, elements)
			}
			sizes = append(sizes, size)
			return true
		})
		if !slices.Equal(sizes, c.sizes) {
			t.Errorf("%s: items of %v bytes, want %v", c.name, sizes, c.sizes)
		}
	}
}

// The initial events of a watch end at the bookmark that says so, in
// protobuf and in JSON; an event that merely carries the annotation does
// not end them, nor does a bookmark without it.
func TestEndsInitialEvents(t *testing.T) {
	end := map[string]string{metav1.InitialEventsAnnotationKey: "true"}
	event := func(typ watch.EventType, annotations map[string]string) *corev1.Service {
		return &corev1.Service{TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: string(typ), ResourceVersion: "9", Annotations: annotations}}
	}
	pb := protobuf.NewSerializer(kubescheme.Scheme, kubescheme.Scheme)
	encode := func(typ watch.EventType, obj runtime.Object, protobuf bool) []byte {
		var raw bytes.Buffer
		if protobuf {
			if err := pb.Encode(obj, &raw); err != nil {
				t.Fatal(err)
			}
			ev := metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw.Bytes()}}
			data, err := ev.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		o, _ := json.Marshal(obj)
		data, _ := json.Marshal(metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: o}})
		return data
	}
	for _, protobuf := range []bool{true, false} {
		for _, c := range []struct {
			typ         watch.EventType
			annotations map[string]string
			want        bool
		}{
			{watch.Bookmark, end, true},
			{watch.Added, end, false},
			{watch.Bookmark, nil, false},
			{watch.Bookmark, map[string]string{metav1.InitialEventsAnnotationKey: "false"}, false},
		} {
			if got := endsInitialEvents(encode(c.typ, event(c.typ, c.annotations), protobuf), protobuf); got != c.want {
				t.Errorf("protobuf %v, %s with annotations %v: ends the initial events %v, want %v", protobuf, c.typ, c.annotations, got, c.want)
			}
		}
	}
	// The events before the bookmark count against the member's bounds
	// while they arrive; the bookmark and what follows do not.
	a := &answers{name: "member1"}
	b := &boundedBody{answers: a, initial: &initialEvents{}}
	for _, frame := range [][]byte{nil, encode(watch.Added, event(watch.Added, nil), false), encode(watch.Bookmark, event(watch.Bookmark, end), false), nil} {
		b.counted(100, frame)
	}
	if n, arriving := b.initial.count(), a.arriving.Load(); n != 2 || arriving != 0 {
		t.Errorf("after the bookmark: %d events counted, %d bytes arriving; want the 2 before it, none arriving", n, arriving)
	}
}

// A JSON watch stream's frames end where json.Decoder's values end, however
// the stream is cut into reads; the items of a list are its objects, each
// of its size; no input panics.
func FuzzJSONFrames(f *testing.F) {
	f.Add([]byte(`{"type":"ADDED","object":{"metadata":{"name":"a}\"{"},"items":[{},[{}]]}}`), uint8(3))
	f.Add([]byte(`[1,"]",{"a":[]}]`), uint8(0))
	f.Add([]byte(`{"a":"\\"}`), uint8(1))
	f.Add([]byte(`}}{{"`), uint8(5))
	f.Fuzz(func(t *testing.T, value []byte, cut uint8) {
		stream := bytes.Join([][]byte{value, value, value}, []byte("\n "))
		var frames [][]byte
		fr := &jsonFrames{}
		for i := 0; i < len(stream); i += int(cut) + 1 {
			fr.next(stream[i:min(i+int(cut)+1, len(stream))], 1<<20, func(_ int64, small []byte) { frames = append(frames, bytes.Clone(small)) })
		}
		(&listItems{}).count(stream) // never panics
		if !json.Valid(value) || len(value) == 0 || value[0] != '{' && value[0] != '[' {
			return
		}
		d := json.NewDecoder(bytes.NewReader(stream))
		for i := range 3 {
			var v json.RawMessage
			if err := d.Decode(&v); err != nil {
				t.Fatalf("decoding value %d: %v", i, err)
			}
			if i >= len(frames) {
				t.Fatalf("%d frames ended, want 3", len(frames))
			}
			if frames[i] != nil && !bytes.Equal(bytes.TrimSpace(frames[i]), v) {
				t.Fatalf("frame %d is %q, want %q", i, frames[i], v)
			}
		}
		if len(frames) != 3 {
			t.Fatalf("%d frames ended, want 3", len(frames))
		}
		if value[0] == '{' {
			var sizes []int
			jsonItems([]byte(`{"items":[`+string(value)+`,`+string(value)+`]}`), func(size, _ int) bool { sizes = append(sizes, size); return true })
			if want := len(bytes.TrimSpace(value)); len(sizes) != 2 || sizes[0] != want || sizes[1] != want {
				t.Fatalf("items of sizes %v in a list of 2 of %d bytes", sizes, want)
			}
		}
	})
}

// A protobuf watch stream's values are counted, never fewer than its
// fields, whatever the bytes; no input panics.
func FuzzProtobufElements(f *testing.F) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "b", Annotations: map[string]string{"k": "v"}},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 1}, {Port: 2}}}}
	data, err := svc.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add(append(bytes.Clone(protobufMagic), data...))
	f.Add([]byte{0x12, 0x00, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, msg []byte) {
		n := protobufElements(msg, maxDepth)
		if top, ok := elementsOf(bytes.TrimPrefix(msg, protobufMagic), 0); ok && n < top {
			t.Fatalf("%d values, fewer than the %d fields at the top", n, top)
		}
		frame := append(binary.BigEndian.AppendUint32(nil, uint32(len(msg))), msg...)
		(&lengthFrames{}).next(frame, maxObjectBytes, func(int64, []byte) {})
	})
}

// count is how many items a list holds, as the bounds count them.
func (l *listItems) count(data []byte) int {
	n := 0
	l.each(data, func(int, int) bool { n++; return true })
	return n
}
