package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/process"
)

const page = `# TYPE mcs_writes_total counter
mcs_writes_total{cluster="member1",kind="Lease",verb="update",result="success"} 40
mcs_writes_total{cluster="member1",kind="EndpointSlice",verb="update",result="success"} 7
mcs_writes_total{cluster="member2",kind="EndpointSlice",verb="create",result="error"} 2
mcs_writes_total{cluster="hub",kind="MultiClusterService",verb="update-status",result="success"} 3
`

func TestWritesLeaveLeasesOut(t *testing.T) {
	f, err := process.ParseMetrics(page)
	if err != nil {
		t.Fatal(err)
	}
	got := Writes(f)
	if len(got) != 2 || got["EndpointSlice"] != 9 || got["MultiClusterService"] != 3 {
		t.Fatalf("writes %v; want EndpointSlice 9 and MultiClusterService 3, no Lease", got)
	}
}

// Lease renewals in the quiet end are the floor; any other write is a
// violation, and a replica seen only once is not counted.
func TestLean(t *testing.T) {
	before := map[string]map[string]float64{"a": {"EndpointSlice": 9}}
	var r Result
	r.Lean(before, map[string]map[string]float64{"a": {"EndpointSlice": 9}, "b": {"EndpointSlice": 4}}, 10*time.Second, time.Minute)
	if r.QuietWrites != 0 || len(r.Violations) != 0 {
		t.Fatalf("quiet writes %d, violations %+v; want none", r.QuietWrites, r.Violations)
	}
	r = Result{}
	r.Lean(before, map[string]map[string]float64{"b": {"EndpointSlice": 4}}, 10*time.Second, time.Minute)
	if len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "no controller replica") {
		t.Fatalf("violations %+v; want one: no replica read at both ends", r.Violations)
	}
	r = Result{}
	r.Lean(before, map[string]map[string]float64{"a": {"EndpointSlice": 11, "ServiceImport": 1}}, 10*time.Second, time.Minute)
	if r.QuietWrites != 3 || len(r.Violations) != 1 || !strings.Contains(r.Violations[0].Detail, "EndpointSlice 2, ServiceImport 1") {
		t.Fatalf("quiet writes %d, violations %+v; want 3 in one lean violation", r.QuietWrites, r.Violations)
	}
}
