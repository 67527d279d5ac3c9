package decide

import (
	"reflect"
	"testing"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// world is one row's input: the strategy, the answer option, the VIPs
// there are, the minimum, and where the ready endpoints are.
type world struct {
	strategy         api.Strategy
	vip, headless    bool
	localVIP, setVIP bool
	minReady         int
	local            int
	fresh, stale     bool
	remapped         bool
}

func (w world) rules() Rules {
	return Rules{LocalFirst: w.strategy == api.LocalFirst, AnswerVIP: w.vip, Headless: w.headless, LocalVIP: w.localVIP, SetVIP: w.setVIP, MinReady: w.minReady, Remapped: w.remapped}
}

func (w world) endpoints() Endpoints {
	return Endpoints{Local: w.local, Fresh: w.fresh, Stale: w.stale}
}

var (
	lf, ral  = api.LocalFirst, api.RemoteAndLocal
	fellBack = func(s Set) Answer { return Answer{Set: s, Failover: s != SetVIP, FellBack: true} }
)

// The table of plugin/mcs/README.md, "Native names: the decision", and
// its stale and LocalFirst policy rules, row by row.
func TestService(t *testing.T) {
	for _, row := range []struct {
		name string
		w    world
		want Answer
	}{
		// RemoteAndLocal
		{"RemoteAndLocal vip: VIP_set", world{strategy: ral, vip: true, setVIP: true, local: 1, fresh: true}, Answer{Set: SetVIP}},
		{"RemoteAndLocal vip, no VIP_set: L ∪ R", world{strategy: ral, vip: true, localVIP: true, local: 1, fresh: true}, Answer{Set: LocalAndFresh}},
		{"RemoteAndLocal headless: L ∪ R", world{strategy: ral, vip: true, headless: true, setVIP: true, local: 1, fresh: true}, Answer{Set: LocalAndFresh}},
		{"RemoteAndLocal endpoints: L ∪ R", world{strategy: ral, setVIP: true, local: 1, fresh: true}, Answer{Set: LocalAndFresh}},
		{"RemoteAndLocal endpoints, R only: L ∪ R", world{strategy: ral, fresh: true}, Answer{Set: LocalAndFresh}},
		{"RemoteAndLocal, a stale provider among fresh ones: L ∪ fresh", world{strategy: ral, local: 1, fresh: true, stale: true}, Answer{Set: LocalAndFresh}},
		{"RemoteAndLocal, every provider stale, L ready: L ∪ fresh, which is L", world{strategy: ral, local: 1, stale: true}, Answer{Set: LocalAndFresh}},
		{"RemoteAndLocal, every provider stale, L empty: the stale", world{strategy: ral, stale: true}, Answer{Set: Stale}},
		{"RemoteAndLocal, nothing ready: the next plugin", world{strategy: ral, localVIP: true}, Answer{}},
		{"RemoteAndLocal vip, nothing ready, VIP_set: VIP_set", world{strategy: ral, vip: true, setVIP: true}, Answer{Set: SetVIP}},
		// LocalFirst, endpoints
		{"LocalFirst endpoints, L ready: L", world{strategy: lf, local: 1, fresh: true}, Answer{Set: Local}},
		{"LocalFirst endpoints, L empty: fresh R", world{strategy: lf, fresh: true, stale: true}, fellBack(Fresh)},
		{"LocalFirst endpoints, L empty, every provider stale: stale R", world{strategy: lf, stale: true}, fellBack(Stale)},
		{"LocalFirst endpoints, minimum 2, 1 ready: fresh R", world{strategy: lf, minReady: 2, local: 1, fresh: true}, fellBack(Fresh)},
		{"LocalFirst endpoints, minimum 2, 2 ready: L", world{strategy: lf, minReady: 2, local: 2, fresh: true}, Answer{Set: Local}},
		{"LocalFirst endpoints, minimum 2, 1 ready, every provider stale: L", world{strategy: lf, minReady: 2, local: 1, stale: true}, Answer{Set: Local}},
		{"LocalFirst endpoints, minimum 2, 1 ready, R empty: L", world{strategy: lf, minReady: 2, local: 1}, Answer{Set: Local}},
		{"LocalFirst endpoints, minimum 0 is 1", world{strategy: lf, minReady: 0, local: 1, fresh: true}, Answer{Set: Local}},
		{"LocalFirst endpoints, nothing ready: the next plugin", world{strategy: lf, localVIP: true, setVIP: true}, Answer{}},
		// LocalFirst, vip
		{"LocalFirst vip, L ready: VIP_local", world{strategy: lf, vip: true, localVIP: true, setVIP: true, local: 1, fresh: true}, Answer{Set: LocalVIP}},
		{"LocalFirst vip, L ready, no local Service: L", world{strategy: lf, vip: true, setVIP: true, local: 1, fresh: true}, Answer{Set: Local}},
		{"LocalFirst vip, L empty: VIP_set", world{strategy: lf, vip: true, localVIP: true, setVIP: true, fresh: true}, fellBack(SetVIP)},
		{"LocalFirst vip, L empty, no VIP_set: fresh R", world{strategy: lf, vip: true, localVIP: true, fresh: true}, fellBack(Fresh)},
		{"LocalFirst vip, minimum 2, 1 ready, every provider stale: VIP_local", world{strategy: lf, vip: true, localVIP: true, setVIP: true, minReady: 2, local: 1, stale: true}, Answer{Set: LocalVIP}},
		{"LocalFirst vip, L empty, every provider stale: VIP_set", world{strategy: lf, vip: true, localVIP: true, setVIP: true, stale: true}, fellBack(SetVIP)},
		{"LocalFirst vip, nothing ready: VIP_local", world{strategy: lf, vip: true, localVIP: true, setVIP: true}, Answer{Set: LocalVIP}},
		{"LocalFirst vip, nothing ready, no local Service: VIP_set", world{strategy: lf, vip: true, setVIP: true}, Answer{Set: SetVIP}},
		{"LocalFirst vip, nothing ready, no VIP: the next plugin", world{strategy: lf, vip: true}, Answer{}},
		{"LocalFirst headless: L", world{strategy: lf, vip: true, headless: true, localVIP: true, local: 1}, Answer{Set: Local}},
		{"LocalFirst headless, L empty: fresh R", world{strategy: lf, vip: true, headless: true, setVIP: true, fresh: true}, fellBack(Fresh)},
		// Endpoints on other ports than the service's: no pod address, the VIP column instead.
		{"remapped RemoteAndLocal endpoints: VIP_set", world{strategy: ral, remapped: true, setVIP: true, local: 1, fresh: true}, Answer{Set: SetVIP}},
		{"remapped RemoteAndLocal vip, no VIP_set: the next plugin", world{strategy: ral, vip: true, remapped: true, localVIP: true, local: 1, fresh: true}, Answer{}},
		{"remapped LocalFirst endpoints, L ready: VIP_local", world{strategy: lf, remapped: true, localVIP: true, setVIP: true, local: 1}, Answer{Set: LocalVIP}},
		{"remapped LocalFirst endpoints, L empty: VIP_set", world{strategy: lf, remapped: true, localVIP: true, setVIP: true, fresh: true}, fellBack(SetVIP)},
		{"remapped LocalFirst vip, L ready, no local Service: the next plugin", world{strategy: lf, vip: true, remapped: true, setVIP: true, local: 1}, Answer{}},
		{"remapped LocalFirst vip, L empty, no VIP_set: the next plugin", world{strategy: lf, vip: true, remapped: true, localVIP: true, fresh: true}, Answer{}},
		{"remapped headless: L ∪ R, on the pods' own ports", world{strategy: ral, headless: true, remapped: true, local: 1, fresh: true}, Answer{Set: LocalAndFresh}},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := Service(new(row.w.rules()), row.w.endpoints()); got != row.want {
				t.Errorf("%+v: got %+v, want %+v", row.w, got, row.want)
			}
		})
	}
}

// Fixed is Service's answer wherever it has one, and it has one only where
// the endpoints cannot change the answer: the plugin then looks up no
// Lease.
func TestFixed(t *testing.T) {
	var endpoints []Endpoints
	for local := range 3 {
		for _, fresh := range []bool{false, true} {
			for _, stale := range []bool{false, true} {
				endpoints = append(endpoints, Endpoints{Local: local, Fresh: fresh, Stale: stale})
			}
		}
	}
	for bits := range 1 << 7 {
		b := func(i int) bool { return bits&(1<<i) != 0 }
		r := Rules{LocalFirst: b(0), AnswerVIP: b(1), Headless: b(2), LocalVIP: b(3), SetVIP: b(4), Remapped: b(5), MinReady: 1 + bits>>6}
		fixed, ok := Fixed(&r)
		answers := map[Answer]bool{}
		for _, e := range endpoints {
			answers[Service(&r, e)] = true
		}
		switch {
		case ok && (len(answers) != 1 || !answers[fixed]):
			t.Errorf("%+v: fixed %+v, but Service answers %v", r, fixed, answers)
		case !ok && len(answers) == 1:
			t.Errorf("%+v: not fixed, but Service always answers %v", r, answers)
		}
	}
	if _, ok := Fixed(&Rules{AnswerVIP: true, SetVIP: true}); !ok {
		t.Error("RemoteAndLocal answering VIP_set is fixed")
	}
}

// A per-endpoint name: a ready local endpoint of that hostname wins
// whatever the strategy and the minimum; else the endpoints column
// decides among the others, never a VIP.
func TestEndpoint(t *testing.T) {
	for _, row := range []struct {
		name string
		w    world
		want Answer
	}{
		{"LocalFirst, local one below the minimum: L", world{strategy: lf, minReady: 3, local: 1, fresh: true}, Answer{Set: Local}},
		{"RemoteAndLocal, local one: L alone", world{strategy: ral, vip: true, setVIP: true, local: 1, fresh: true}, Answer{Set: Local}},
		{"RemoteAndLocal vip, remote only: R's endpoints", world{strategy: ral, vip: true, setVIP: true, fresh: true}, Answer{Set: LocalAndFresh}},
		{"LocalFirst vip, remote only: R's endpoints", world{strategy: lf, vip: true, localVIP: true, setVIP: true, fresh: true}, fellBack(Fresh)},
		{"LocalFirst, stale only: the stale", world{strategy: lf, stale: true}, fellBack(Stale)},
		{"none: the next plugin", world{strategy: lf, vip: true, localVIP: true, setVIP: true}, Answer{}},
		{"remapped, remote only: R's endpoints, a pod's name on its own ports", world{strategy: ral, remapped: true, setVIP: true, fresh: true}, Answer{Set: LocalAndFresh}},
	} {
		t.Run(row.name, func(t *testing.T) {
			if got := Endpoint(new(row.w.rules()), row.w.endpoints()); got != row.want {
				t.Errorf("%+v: got %+v, want %+v", row.w, got, row.want)
			}
		})
	}
}

// The policy annotations; a value that does not parse leaves the default.
func TestPolicyOf(t *testing.T) {
	for _, tc := range []struct {
		minReady, order string
		want            Policy
	}{
		{"", "", Policy{}},
		{"3", "", Policy{MinReady: 3}},
		{"0", "", Policy{}},
		{"-2", "", Policy{}},
		{"two", "", Policy{}},
		{"", "member3,member2", Policy{Order: []string{"member3", "member2"}}},
	} {
		annotations := map[string]string{}
		if tc.minReady != "" {
			annotations[api.AnnotationMinReadyEndpoints] = tc.minReady
		}
		if tc.order != "" {
			annotations[api.AnnotationFailoverOrder] = tc.order
		}
		if got := PolicyOf(annotations); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q %q: %+v, want %+v", tc.minReady, tc.order, got, tc.want)
		}
	}
}

// The plugin asks on every native query: the table must not allocate.
func TestServiceAllocatesNothing(t *testing.T) {
	w := world{strategy: lf, vip: true, localVIP: true, setVIP: true, minReady: 2, local: 1, fresh: true}
	r, e := w.rules(), w.endpoints()
	if n := testing.AllocsPerRun(100, func() { Service(&r, e) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// An endpoint port is remapped when it stands for a service port, by name
// and protocol, under another number.
func TestRemapped(t *testing.T) {
	service := []Port{{Name: "http", Protocol: "TCP", Number: 80}, {Name: "dns", Protocol: "UDP", Number: 53}}
	for _, row := range []struct {
		p    Port
		want bool
	}{
		{Port{Name: "http", Protocol: "TCP", Number: 80}, false},
		{Port{Name: "http", Protocol: "TCP", Number: 8080}, true},
		{Port{Name: "HTTP", Number: 8080}, true}, // names match case-insensitively, "" is TCP
		{Port{Name: "dns", Protocol: "UDP", Number: 5353}, true},
		{Port{Name: "dns", Protocol: "TCP", Number: 5353}, false}, // no such service port
		{Port{Name: "metrics", Protocol: "TCP", Number: 9090}, false},
	} {
		if got := Remapped(service, row.p); got != row.want {
			t.Errorf("%+v: got %t, want %t", row.p, got, row.want)
		}
	}
}
