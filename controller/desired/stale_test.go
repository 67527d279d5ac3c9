package desired

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func readiness(s *discoveryv1.EndpointSlice) (ready, serving []bool) {
	for _, e := range s.Endpoints {
		ready = append(ready, ptr.Deref(e.Conditions.Ready, true))
		serving = append(serving, ptr.Deref(e.Conditions.Serving, true))
	}
	return ready, serving
}

// A stale provider's imported endpoints are not ready while a fresh one
// has a ready endpoint, serving as they were; otherwise they are imported
// as they are.
func TestStale(t *testing.T) {
	notReadyOne := slice("foo-b", "10.0.0.2")
	notReadyOne.Endpoints[0].Conditions.Ready = ptr.To(false)
	for _, tc := range []struct {
		name         string
		m1, m2       bool // stale
		m2Slice      *discoveryv1.EndpointSlice
		want1, want2 bool // the first endpoint of each ready
	}{
		{"none stale", false, false, slice("foo-b", "10.0.0.2"), true, true},
		{"m1 stale", true, false, slice("foo-b", "10.0.0.2"), false, true},
		{"m1 stale, m2 has no ready endpoint", true, false, notReadyOne, true, false},
		{"both stale", true, true, slice("foo-b", "10.0.0.2"), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Compute(&Input{Namespace: "ns", Name: "foo", Members: map[string]Member{
				"m1": {Known: true, Stale: tc.m1, Service: svc(false), Export: exportAt(0), Slices: []*discoveryv1.EndpointSlice{slice("foo-a", "10.0.0.1")}},
				"m2": {Known: true, Stale: tc.m2, Service: svc(false), Export: exportAt(1), Slices: []*discoveryv1.EndpointSlice{tc.m2Slice}},
			}})
			for _, s := range p.Slices {
				ready, serving := readiness(s)
				want := map[string]bool{"m1": tc.want1, "m2": tc.want2}[s.Labels[mcsv1b1.LabelSourceCluster]]
				if ready[0] != want {
					t.Errorf("%s ready %v, want %v", s.Name, ready[0], want)
				}
				_, marked := s.Annotations[api.AnnotationStale]
				if wantMarked := s.Labels[mcsv1b1.LabelSourceCluster] == "m1" && !tc.want1; marked != wantMarked {
					t.Errorf("%s annotations %v, want marked %v", s.Name, s.Annotations, wantMarked)
				}
				if s.Name == "imported-m1-foo-a" && !serving[0] {
					t.Errorf("%s serving changed", s.Name)
				}
			}
		})
	}
}

// A slice of a member whose source cannot be read is marked and unmarked
// in place, ready again meaning serving and not terminating.
func TestRestale(t *testing.T) {
	s := Imported("m1", "foo", slice("foo-a", "10.0.0.1", "10.0.0.2", "10.0.0.3"))
	s.Endpoints[1].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}
	s.Endpoints[2].Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(false), Serving: ptr.To(false)}
	stale := &Plan{Stale: []string{"m1"}, ReadyElsewhere: true}
	marked := stale.Restale(s)
	if ready, _ := readiness(marked); ready[0] || ready[1] || ready[2] || marked.Annotations[api.AnnotationStale] == "" {
		t.Fatalf("marked %+v", marked)
	}
	if stale.Restale(marked) != nil {
		t.Error("a marked slice is marked again")
	}
	// A mark stays while another is ready, its cluster stale or not: a
	// restarted controller counts the cluster's absence from its own start.
	if (&Plan{ReadyElsewhere: true}).Restale(marked) != nil {
		t.Error("a marked slice is restored while another cluster is ready")
	}
	for _, p := range []*Plan{{Stale: []string{"m1"}}, {}} {
		back := p.Restale(marked)
		if back == nil {
			t.Fatalf("plan %+v leaves it marked", p)
		}
		if ready, serving := readiness(back); ready[0] != true || ready[1] || ready[2] || !serving[1] || serving[2] {
			t.Errorf("restored ready %v serving %v, want the source's [true false false] [true true false]", ready, serving)
		}
		if _, ok := back.Annotations[api.AnnotationStale]; ok || p.Restale(back) != nil {
			t.Errorf("restored %v is not as it was", back.Annotations)
		}
	}
}

// Every label and annotation key that an imported slice gets, stale or
// not, is one of SliceLabels or SliceAnnotations: a key left out would be
// compared by no sync, nor written away when it goes.
func TestImportedSliceKeysOwned(t *testing.T) {
	s := Imported("member1", "foo", &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo-1", Generation: 1},
		Endpoints:  []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.1"}}},
	})
	for _, out := range []*discoveryv1.EndpointSlice{s, notReady(s)} {
		for k := range out.Labels {
			if !slices.Contains(SliceLabels, k) {
				t.Errorf("label %s is not in SliceLabels", k)
			}
		}
		for k := range out.Annotations {
			if !slices.Contains(SliceAnnotations, k) {
				t.Errorf("annotation %s is not in SliceAnnotations", k)
			}
		}
	}
}
