package members

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/controller/internal/hostilemember"
)

// Each kind of request a member is asked is bounded at what it needs.
func TestAnswerBound(t *testing.T) {
	protobufStream := http.Header{"Content-Type": {"application/vnd.kubernetes.protobuf;stream=watch"}}
	for _, c := range []struct {
		method, path string
		header       http.Header
		limit        int64
		frames       framer
		items        any
	}{
		{"GET", "/readyz", nil, maxProbeBytes, nil, nil},
		{"GET", "/apis/multicluster.x-k8s.io/v1beta1", nil, maxObjectBytes, nil, nil},
		{"GET", "/api/v1", nil, maxObjectBytes, nil, nil},
		{"GET", "/api/v1/namespaces/kube-system", nil, maxObjectBytes, nil, nil},
		{"GET", "/api/v1/namespaces/a/services/foo", nil, maxObjectBytes, nil, nil},
		{"PUT", "/api/v1/namespaces/a/services/foo", nil, maxObjectBytes, nil, nil},
		{"POST", "/api/v1/namespaces/a/services", nil, maxObjectBytes, nil, nil},
		{"GET", "/api/v1/namespaces", nil, 0, nil, &listItems{}},
		{"GET", "/api/v1/services", nil, 0, nil, &listItems{}},
		{"GET", "/apis/discovery.k8s.io/v1/namespaces/a/endpointslices", nil, 0, nil, &listItems{}},
		{"GET", "/apis/multicluster.x-k8s.io/v1beta1/serviceexports", nil, 0, nil, &listItems{}},
		{"GET", "/apis/multicluster.x-k8s.io/v1beta1/serviceexports?watch=true", nil, maxObjectBytes, &jsonFrames{}, nil},
		{"GET", "/api/v1/services?watch=true", protobufStream, maxObjectBytes, &lengthFrames{}, nil},
		{"GET", "/api/v1/services?watch=true&sendInitialEvents=true", protobufStream, maxObjectBytes, &lengthFrames{}, &initialEvents{}},
	} {
		u, _ := url.Parse(c.path)
		limit, frames, initial, list := answerBound(&http.Request{Method: c.method, URL: u}, &http.Response{Header: c.header})
		var items any
		switch {
		case initial != nil:
			items = initial
		case list != nil:
			items = list
		}
		if limit != c.limit || fmt.Sprintf("%T %T", frames, items) != fmt.Sprintf("%T %T", c.frames, c.items) {
			t.Errorf("%s %s: bound %d in frames %T, objects counted by %T; want %d in %T, %T", c.method, c.path, limit, frames, items, c.limit, c.frames, c.items)
		}
	}
}

// A protobuf watch event is refused by its frame's length, before any of
// it is read; the frames before it pass however many there are.
func TestLengthFrames(t *testing.T) {
	frame := func(n int) []byte {
		return append([]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, make([]byte, n)...)
	}
	var stream []byte
	for range 100 {
		stream = append(stream, frame(1000)...)
	}
	f := &lengthFrames{}
	ended := 0
	count := func(int64, []byte) { ended++ }
	for i := 0; i < len(stream); i += 7 { // cut anywhere, the length too
		if over := f.next(stream[i:min(i+7, len(stream))], 1000, count); over != "" {
			t.Fatalf("frames of the bound refused at byte %d", i)
		}
	}
	if ended != 100 {
		t.Errorf("%d frames ended, want 100", ended)
	}
	if over := f.next(frame(1001)[:4], 1000, count); over != "larger than 1k" {
		t.Errorf("a frame past the bound: %q, want it refused by its length", over)
	}
}

// A member's watch event that inflates from a few KiB of gzip to 1 GiB
// is refused once 2 MiB of it are read, inflated: the member is taken out,
// saying what it answered, and the controller's heap barely moves;
// another member is unaffected.
func TestHostileWatchEvent(t *testing.T) {
	const inflated = 1 << 30
	hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
		if hostilemember.ResourceOf(r) != "serviceexports" || !isWatch(r) {
			return false
		}
		// Unasked too: Go's transport asks for gzip itself.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		_, _ = fmt.Fprint(gz, `{"type":"ADDED","object":{"kind":"ServiceExport","apiVersion":"multicluster.x-k8s.io/v1beta1","metadata":{"name":"x","namespace":"a","annotations":{"pad":"`)
		if hostilemember.WriteUntilGone(gz, bytes.Repeat([]byte("x"), 1<<20), inflated>>20) == nil {
			_, _ = fmt.Fprint(gz, `"}}}}`)
			_ = gz.Close()
		}
		return true
	})
	good := newHostileMember(t, "member2", nil)
	peak := hostilemember.PeakHeap()
	r := runHostile(t, hostile, good)
	refusedWith(t, r, "member1", "member1 answered GET /apis/multicluster.x-k8s.io/v1beta1/serviceexports with a watch event larger than 2Mi (decoded): refused", "listed again in 10m")
	healthyNow(t, r, "member2")
	checkPeak(t, peak(), 64<<20)
}

// A member's list (which the informers ask for when the API server does
// not stream it as a watch) is refused once it holds more objects than
// the member may have held (10^6 empty ones take 3 MB, and would decode to
// a GiB of Services), once its bytes, with what the member holds, pass
// --member-max-mib (here 4 MiB) as they arrive, or when one of its objects
// is larger than an API server stores: each object is bounded as a watch
// event is, and the whole as the initial events of a watch-list are.
func TestHostileList(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	for _, c := range []struct {
		name string
		n    int
		item func(i int) string
		want string
	}{
		{"10^6 objects", 1_000_000, func(int) string { return `{}` }, "member1 answered GET /api/v1/services with more than 1000 objects, more than its informers may hold (--member-max-objects): refused"},
		{"40 MiB", 1_000_000, func(i int) string {
			return fmt.Sprintf(`{"metadata":{"name":"service-%07d","namespace":"a","annotations":{"pad":"%s"}}}`, i, strings.Repeat("x", 400))
		}, "member1 answered GET /api/v1/services with a list that, with what it holds, takes more than 4Mi (decoded; --member-max-mib): refused"},
		{"an object of 3 MiB", 10, func(i int) string {
			pad := ""
			if i == 0 {
				pad = strings.Repeat("x", 3<<20)
			}
			return fmt.Sprintf(`{"metadata":{"name":"service-%07d","namespace":"a","annotations":{"pad":"%s"}}}`, i, pad)
		}, "member1 answered GET /api/v1/services with a list of an object larger than 2Mi (decoded): refused, as no API server stores one"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
				if hostilemember.ResourceOf(r) != "services" || isWatch(r) {
					return false
				}
				w.Header().Set("Content-Type", "application/json")
				b := bufio.NewWriterSize(w, 64<<10)
				_, _ = fmt.Fprint(b, `{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[`)
				for i := range c.n {
					if i > 0 {
						_, _ = b.WriteString(",")
					}
					if _, err := b.WriteString(c.item(i)); err != nil {
						return true
					}
				}
				_, _ = fmt.Fprint(b, `]}`)
				_ = b.Flush()
				return true
			})
			good := newHostileMember(t, "member2", nil)
			peak := hostilemember.PeakHeap()
			r := runHostile(t, hostile, good)
			refusedWith(t, r, "member1", c.want)
			healthyNow(t, r, "member2")
			checkPeak(t, peak(), 80<<20)
		})
	}
}

// A member whose API server pages its lists (as one without a watch
// cache does) is bounded by all the pages of a list together, as
// client-go's pager holds them all until the last: two pages, each within
// --member-max-mib (here 4 MiB) and --member-max-objects (1,000), are
// refused at the second, by their bytes (3 MiB each) or their objects
// (600 each).
func TestHostileListPages(t *testing.T) {
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	for _, c := range []struct {
		name         string
		perPage, pad int
		want         string
	}{
		{"bytes", 3, 1 << 20, "member1 answered GET /api/v1/services with a list that, with what it holds, takes more than 4Mi (decoded; --member-max-mib): refused"},
		{"objects", 600, 0, "member1 answered GET /api/v1/services with more than 1000 objects, more than its informers may hold (--member-max-objects): refused"},
	} {
		t.Run(c.name, func(t *testing.T) {
			hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
				if hostilemember.ResourceOf(r) != "services" || isWatch(r) {
					return false
				}
				next := map[string]string{"": "page-2", "page-2": ""}[r.URL.Query().Get("continue")]
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"kind":"ServiceList","apiVersion":"v1","metadata":{"resourceVersion":"1","continue":%q},"items":[`, next)
				for i := range c.perPage {
					if i > 0 {
						_, _ = w.Write([]byte(","))
					}
					_, _ = fmt.Fprintf(w, `{"metadata":{"name":"service-%s-%d","namespace":"a","annotations":{"pad":"%s"}}}`, next, i, strings.Repeat("x", c.pad))
				}
				_, _ = fmt.Fprint(w, `]}`)
				return true
			})
			good := newHostileMember(t, "member2", nil)
			r := runHostile(t, hostile, good)
			refusedWith(t, r, "member1", c.want)
			healthyNow(t, r, "member2")
		})
	}
}

// The pages of a list stay counted as arriving until its last is read; a
// list begun afresh releases the pages of one its pager gave up.
func TestListPagesArriving(t *testing.T) {
	a := &answers{name: "member1"}
	page := func(continues, next string) {
		t.Helper()
		rt := a.wrap(roundTripperFunc(func(*http.Request) (*http.Response, error) {
			body := fmt.Sprintf(`{"kind":"ServiceList","apiVersion":"v1","metadata":{"continue":%q},"items":[{"metadata":{"name":"a"}}]}`, next)
			return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body))}, nil
		}))
		u, _ := url.Parse("https://member1/api/v1/services?limit=500&continue=" + continues)
		resp, err := rt.RoundTrip(&http.Request{Method: http.MethodGet, URL: u})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	page("", "2")
	first := a.arriving.Load()
	if page("2", "3"); first == 0 || a.arriving.Load() <= first {
		t.Errorf("two pages of a list read, %d bytes arriving after the first and %d after the second; want them all counted", first, a.arriving.Load())
	}
	if page("", "2"); a.arriving.Load() != first {
		t.Errorf("a list begun afresh: %d bytes arriving, want its first page's alone, %d", a.arriving.Load(), first)
	}
	page("2", "")
	if n := a.arriving.Load(); n != 0 {
		t.Errorf("the last page read: %d bytes arriving, want none", n)
	}
}

// A GET of one object (the member's kube-system Namespace, read for its
// identity) of 500 MiB is refused at 2 MiB.
func TestHostileGet(t *testing.T) {
	hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/api/v1/namespaces/kube-system" {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kube-system","annotations":{"pad":"`)
		if hostilemember.WriteUntilGone(w, bytes.Repeat([]byte("x"), 1<<20), 500) == nil {
			_, _ = fmt.Fprint(w, `"}}}`)
		}
		return true
	})
	good := newHostileMember(t, "member2", nil)
	peak := hostilemember.PeakHeap()
	r := runHostile(t, hostile, good)
	refusedWith(t, r, "member1", "member1 answered GET /api/v1/namespaces/kube-system with an answer larger than 2Mi (decoded): refused")
	healthyNow(t, r, "member2")
	checkPeak(t, peak(), 64<<20)
}

// A probe's answer is a few KiB: one that goes on is refused at 8 KiB,
// and one that trickles a byte a second fails the probe at its deadline.
func TestHostileReadyz(t *testing.T) {
	endless := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/readyz" {
			return false
		}
		_ = hostilemember.WriteUntilGone(w, []byte(strings.Repeat("ok\n", 1000)), 1<<20)
		return true
	})
	slow := newHostileMember(t, "member3", func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/readyz" {
			return false
		}
		hostilemember.Slowly(w, r)
		return true
	})
	good := newHostileMember(t, "member2", nil)
	peak := hostilemember.PeakHeap()
	r := runHostile(t, endless, slow, good)
	refusedWith(t, r, "member1", "member1 answered GET /readyz with an answer larger than 8Ki (decoded): refused")
	refusedWith(t, r, "member3", "context deadline exceeded")
	healthyNow(t, r, "member2")
	checkPeak(t, peak(), 64<<20)
}

// checkPeak fails the test when the heap grew past bound at its peak.
func checkPeak(t *testing.T, got, bound uint64) {
	t.Helper()
	t.Logf("the heap grew by %.1f MiB at its peak", float64(got)/(1<<20))
	if got > bound {
		t.Errorf("the heap grew by %.1f MiB at its peak, want at most %d MiB", float64(got)/(1<<20), bound>>20)
	}
}

// A member that streams 10^6 Services as the initial events of a watch
// (watch-list) is taken out before the controller holds them all.
func TestHostileWatchList(t *testing.T) {
	hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
		if hostilemember.ResourceOf(r) != "services" || !isWatch(r) {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		b := bufio.NewWriterSize(w, 64<<10)
		for i := range 1_000_000 {
			if _, err := fmt.Fprintf(b, `{"type":"ADDED","object":{"kind":"Service","apiVersion":"v1","metadata":{"name":"service-%07d","namespace":"a","resourceVersion":"1"}}}`+"\n", i); err != nil {
				return true
			}
		}
		_ = b.Flush()
		<-r.Context().Done()
		return true
	})
	good := newHostileMember(t, "member2", nil)
	peak := hostilemember.PeakHeap()
	r := runHostile(t, hostile, good)
	refusedWith(t, r, "member1", "member1 answered GET /api/v1/services with more than 1000 objects, more than its informers may hold (--member-max-objects): refused")
	healthyNow(t, r, "member2")
	checkPeak(t, peak(), 64<<20)
}

// A member whose initial events (watch-list), each within the bound of
// one object, take more than it may have held is taken out before
// client-go holds them all: they count as they arrive, inflated.
func TestHostileInitialEvents(t *testing.T) {
	hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
		if hostilemember.ResourceOf(r) != "serviceimports" || !isWatch(r) {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Encoding", "gzip")
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		pad := strings.Repeat("x", 1<<20)
		for i := range 1000 {
			if _, err := fmt.Fprintf(gz, `{"type":"ADDED","object":{"kind":"ServiceImport","apiVersion":"multicluster.x-k8s.io/v1beta1","metadata":{"name":"i%d","namespace":"a","resourceVersion":"1","annotations":{"pad":%q}},"spec":{"type":"ClusterSetIP"}}}`+"\n", i, pad); err != nil {
				return true
			}
		}
		_ = gz.Close()
		<-r.Context().Done()
		return true
	})
	good := newHostileMember(t, "member2", nil)
	peak := hostilemember.PeakHeap()
	r := runHostile(t, hostile, good)
	refusedWith(t, r, "member1", "member1 answered GET /apis/multicluster.x-k8s.io/v1beta1/serviceimports with initial events that, with what it holds, take more than 4Mi (decoded; --member-max-mib): refused")
	healthyNow(t, r, "member2")
	checkPeak(t, peak(), 64<<20)
}

// A watch event of a million empty values, 2 MiB of JSON or protobuf, is
// refused by its values, before it is decoded.
func TestTooManyElements(t *testing.T) {
	raw := append(bytes.Clone(protobufMagic), bytes.Repeat([]byte{0x12, 0x00}, maxElements)...) // endpoints {}
	object := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), raw)      // RawExtension.raw
	body := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), "ADDED")   // WatchEvent.type
	body = protowire.AppendBytes(protowire.AppendTag(body, 2, protowire.BytesType), object)     // WatchEvent.object
	event := append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	if over := (&lengthFrames{}).next(event, maxObjectBytes, func(int64, []byte) {}); over != "of more than 131072 values" {
		t.Errorf("protobuf: %q, want the event refused by its values", over)
	}
	js := `{"type":"ADDED","object":{"endpoints":[` + strings.Repeat("{},", maxElements) + `{}]}}`
	if over := (&jsonFrames{}).next([]byte(js), maxObjectBytes, func(int64, []byte) {}); over != "of more than 131072 values" {
		t.Errorf("JSON: %q, want the event refused by its values", over)
	}
}

// A member's watch event of a million empty endpoints, 2 MiB that would
// decode to over 100 MiB, is refused before it is decoded; an
// EndpointSlice of 1,000 endpoints, the most an API server lets one
// hold, is far within the bound.
func TestHostileEmptyValues(t *testing.T) {
	empties := strings.TrimSuffix(strings.Repeat("{},", (2<<20-300)/3), ",")
	hostile := newHostileMember(t, "member1", func(w http.ResponseWriter, r *http.Request) bool {
		if hostilemember.ResourceOf(r) != "endpointslices" || !isWatch(r) {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"type":"ADDED","object":{"kind":"EndpointSlice","apiVersion":"discovery.k8s.io/v1","metadata":{"name":"s","namespace":"a","resourceVersion":"1"},"addressType":"IPv4","endpoints":[%s]}}`+"\n", empties)
		<-r.Context().Done()
		return true
	})
	good := newHostileMember(t, "member2", nil)
	peak := hostilemember.PeakHeap()
	r := runHostile(t, hostile, good)
	refusedWith(t, r, "member1", "member1 answered GET /apis/discovery.k8s.io/v1/endpointslices with a watch event of more than 131072 values (decoded): refused")
	healthyNow(t, r, "member2")
	checkPeak(t, peak(), 64<<20)

	full := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "full", Namespace: "a", Labels: map[string]string{discoveryv1.LabelServiceName: "full"}}}
	for i := range 1000 {
		full.Endpoints = append(full.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.0.%d.%d", i/256, i%256)},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			Hostname:   ptr.To(fmt.Sprintf("pod-%d", i)), NodeName: ptr.To("node"), Zone: ptr.To("zone-a"),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: "a", Name: fmt.Sprintf("pod-%d", i), UID: "u"}})
	}
	data, err := full.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if n := protobufElements(data, maxDepth); n > maxElements/4 {
		t.Errorf("an EndpointSlice of 1,000 endpoints counts %d values, want at most a quarter of %d", n, maxElements)
	}
}
