package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// endpoints is a slice of svc with n endpoints, 10.<octet>.0.1 on.
func endpoints(svc, name string, generation int64, octet, n int) *discoveryv1.EndpointSlice {
	addrs := make([]string, n)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("10.%d.0.%d", octet, i+1)
	}
	return slice(svc, name, generation, addrs...)
}

// expectValid fails the test unless cluster's export of name says
// Valid=False with reason, naming flag.
func expectValid(t *testing.T, f *fixture, cluster, name, reason, flag string) {
	t.Helper()
	c := meta.FindStatusCondition(f.exportOf(cluster, name).Status.Conditions, string(mcsv1b1.ServiceExportConditionValid))
	if c == nil || c.Reason != reason || !strings.Contains(c.Message, flag) {
		t.Errorf("%s's Valid condition %+v, want False %s naming %s", name, c, reason, flag)
	}
}

// removed is what taking service name out of a consumer writes there.
func removed(name string) []string {
	return []string{
		"delete endpointslices demo/imported-member1-" + name + "-1",
		"delete services demo/derived-" + name,
		"delete serviceimports demo/" + name,
	}
}

// A member's exports import at most --member-max-endpoints into each
// consumer: past it its newest are left out, the older ones untouched;
// an older one that grows takes the newest out, and one left out comes
// back only once its older exports leave a tenth of the budget free, so
// that it does not flap in and out with them. A restart moves nothing.
func TestEndpointBudget(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(),
			service("foo", false, t0), endpoints("foo", "foo-1", 1, 1, 5), export("foo", t0),
			service("bar", false, t0), endpoints("bar", "bar-1", 1, 2, 5), export("bar", t0.Add(time.Hour)),
			service("baz", false, t0), endpoints("baz", "baz-1", 1, 3, 1), export("baz", t0.Add(2*time.Hour)),
		},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{MemberMaxEndpoints: 10}))
	f.sync("demo/foo")
	f.sync("demo/bar")
	f.importOf(m2, "bar") // within the budget: foo and bar take 10
	expect(t, "the newest export, past the budget", f.sync("demo/baz"), writes{m1: {"update serviceexports/status demo/baz"}})
	expectValid(t, f, m1, "baz", "TooManyEndpoints", "--member-max-endpoints")
	for _, k := range []string{"demo/foo", "demo/bar", "demo/baz"} {
		expect(t, "again "+k, f.sync(k), writes{})
	}
	if got := testutil.ToFloat64(exportsOverBudget.WithLabelValues(m1)); got != 1 {
		t.Errorf("mcs_member_exports_over_endpoint_budget{cluster=member1} %v, want 1", got)
	}

	// foo, the oldest, grows by one: bar, newer, leaves; foo is imported whole.
	resize := func(n int) writes {
		t.Helper()
		for queued(f.c, "") {
		}
		f.change(m1, endpoints("foo", "foo-1", int64(n), 1, n), "update")
		return f.sync("demo/foo")
	}
	slice := []string{"update endpointslices demo/imported-member1-foo-1"}
	expect(t, "foo grows to 6", resize(6), writes{m1: slice, m2: slice, m3: slice})
	if !queued(f.c, "demo/bar") {
		t.Fatal("bar, now past the budget, is not queued")
	}
	expect(t, "bar past the budget", f.sync("demo/bar"), writes{m1: append(removed("bar"), "update serviceexports/status demo/bar"), m2: removed("bar"), m3: removed("bar")})
	expectValid(t, f, m1, "bar", "TooManyEndpoints", "--member-max-endpoints")

	// Back to 5, where bar fitted: bar waits for a tenth of the budget.
	expect(t, "foo shrinks to 5", resize(5), writes{m1: slice, m2: slice, m3: slice})
	expect(t, "bar within the margin", f.sync("demo/bar"), writes{})

	f.restart()
	for _, k := range []string{"demo/foo", "demo/bar", "demo/baz"} {
		expect(t, "after a restart "+k, f.sync(k), writes{})
	}

	expect(t, "foo shrinks to 4", resize(4), writes{m1: slice, m2: slice, m3: slice})
	if !queued(f.c, "demo/bar") {
		t.Fatal("bar, room made for it, is not queued")
	}
	got := f.sync("demo/bar")
	if len(got[m2]) == 0 || len(got[m3]) == 0 {
		t.Errorf("bar back within the budget: writes %v, want its import in member2 and member3", got)
	}
	f.importOf(m2, "bar")
	expect(t, "baz still past the budget with its margin", f.sync("demo/baz"), writes{})
}

// An import has at most --max-imported-ports ports: an export whose
// Service has more is not used, and the ports a newer export would add
// past the bound are not imported, which its Conflict condition says.
func TestTooManyPorts(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(),
			withPorts(service("foo", false, t0), "a/100/TCP", "b/101/TCP", "c/102/TCP"), endpoints("foo", "foo-1", 1, 1, 1), export("foo", t0),
			withPorts(service("bar", false, t0), "a/100/TCP", "b/101/TCP"), endpoints("bar", "bar-1", 1, 2, 1), export("bar", t0),
		},
		m2: {ns1()},
		m3: {ns1(), withPorts(service("bar", false, t0), "c/200/TCP", "d/201/TCP"), endpoints("bar", "bar-3", 1, 3, 1), export("bar", t0.Add(time.Hour))},
	}, withOptions(Options{MaxImportedPorts: 2}))
	expect(t, "three ports", f.sync("demo/foo"), writes{m1: {"update serviceexports/status demo/foo"}})
	expectValid(t, f, m1, "foo", "TooManyPorts", "--max-imported-ports")

	f.sync("demo/bar")
	if ports := f.importOf(m2, "bar").Spec.Ports; len(ports) != 2 || ports[0].Port != 100 || ports[1].Port != 101 {
		t.Errorf("bar's import ports %v, want the oldest export's 100 and 101 alone", ports)
	}
	c := meta.FindStatusCondition(f.exportOf(m3, "bar").Status.Conditions, string(mcsv1b1.ServiceExportConditionConflict))
	if c == nil || c.Status != "True" || !strings.Contains(c.Message, "--max-imported-ports") {
		t.Errorf("member3's bar Conflict condition %+v, want True naming --max-imported-ports", c)
	}
}

// A replica counts a member's every export against its budget, those of
// services it has not synced (another shard's) too, read afresh from its
// caches once they change.
func TestEndpointBudgetCountsAnotherShard(t *testing.T) {
	mine, theirs := nameOfShard(0, 2), nameOfShard(1, 2)
	set := shards.NewSet(2)
	set.Want(0)
	set.Hold()
	f := newFixture(t, world{
		m1: {ns1(),
			service(theirs, false, t0), endpoints(theirs, theirs+"-1", 1, 1, 5), export(theirs, t0),
			service(mine, false, t0), endpoints(mine, mine+"-1", 1, 2, 5), export(mine, t0.Add(time.Hour)),
		},
		m2: {ns1()},
		m3: {ns1()},
	}, withOptions(Options{MemberMaxEndpoints: 10, Shards: set}))
	f.sync("demo/" + mine)
	f.importOf(m2, mine) // within the budget with the older export of the other shard
	for queued(f.c, "") {
	}
	f.change(m1, endpoints(theirs, theirs+"-1", 2, 1, 6), "update")
	// The informer's handlers run after its cache has the change.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, "demo/"+mine), nil
	})
	if err != nil {
		t.Error("the other shard's export grew by a member at its budget, and no service of this replica's it exports was queued")
	}
	gone := removed(mine)
	expect(t, "the other shard's export grew", f.sync("demo/"+mine), writes{m1: append(slices.Clone(gone), "update serviceexports/status demo/"+mine), m2: gone, m3: gone})
	expectValid(t, f, m1, mine, "TooManyEndpoints", "--member-max-endpoints")
}
