package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
)

// Agents as the audit logs have them: the controller's, the harness's
// (labtest's clients) and kube-controller-manager's.
const (
	ctlMember1 = "mcs-controller/member1"
	ctlHub     = "mcs-controller/hub"
	harness    = "labtest"
	kcm        = "kube-controller-manager/v0.0.0 (linux/amd64) kubernetes/$Format/endpointslice-controller"
)

var t0 = time.Date(2026, 11, 29, 7, 0, 0, 0, time.UTC)

// auditLine is one line of a kube-apiserver audit log at Metadata level,
// as the lab's policy writes it, s seconds after t0.
func auditLine(s float64, verb, agent, resource, sub, ns, name string, code int) string {
	group, res, _ := strings.Cut(resource, "/")
	if res == "" {
		group, res = "", resource
	}
	at := t0.Add(time.Duration(s * float64(time.Second))).Format("2006-01-02T15:04:05.000000Z")
	return fmt.Sprintf(`{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"%x","stage":"ResponseComplete",`+
		`"requestURI":"/apis/%s/v1/namespaces/%s/%s/%s","verb":"%s","user":{"username":"lab-admin","groups":["system:masters","system:authenticated"]},`+
		`"sourceIPs":["127.0.0.1"],"userAgent":%q,"objectRef":{"resource":"%s","namespace":"%s","name":"%s","apiGroup":"%s","apiVersion":"v1","subresource":"%s"},`+
		`"responseStatus":{"metadata":{},"code":%d},"requestReceivedTimestamp":"%s","stageTimestamp":"%s"}`,
		int(s*1000), group, ns, res, name, verb, agent, res, ns, name, group, sub, code, at, at)
}

// readLines is lines as ReadAudit reads them from cluster's log.
func readLines(t *testing.T, cluster string, lines ...string) map[string][]auditv1.Event {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, cluster+"-audit.log"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logs, err := ReadAudit(dir)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

const slice = "discovery.k8s.io/endpointslices"

// The harness's hand edits and deletions of the controller's objects, and
// the controller writing them back and making them again, break nothing;
// writes before the run, refused ones and others' are not the controller's
// to check.
func TestOwnedAcrossRecreations(t *testing.T) {
	logs := readLines(t, member1,
		auditLine(1, "create", ctlMember1, slice, "", "ns", "imported-member2-s00", 201),
		auditLine(2, "update", harness, slice, "", "ns", "imported-member2-s00", 200),
		auditLine(3, "update", ctlMember1, slice, "", "ns", "imported-member2-s00", 200),
		auditLine(4, "deletecollection", harness, slice, "", "ns", "", 200),
		auditLine(5, "update", ctlMember1, slice, "", "ns", "imported-member2-s00", 404),
		auditLine(6, "create", ctlMember1, slice, "", "ns", "imported-member2-s00", 201),
		auditLine(7, "delete", ctlMember1, slice, "", "ns", "imported-member2-s00", 200),
		auditLine(8, "patch", kcm, slice, "", "ns", "s00-abcde", 200),
		// A create that timed out while etcd was frozen, but went
		// through: the update that follows is of the controller's own.
		auditLine(9, "create", ctlMember1, "services", "", "ns", "derived-s00", 504),
		auditLine(9.5, "update", ctlMember1, "services", "", "ns", "derived-s00", 200),
		auditLine(-5, "update", ctlMember1, "services", "", "ns", "s00", 200),
		auditLine(20, "update", ctlMember1, "services", "", "ns", "s00", 200),
	)
	var r Result
	r.Owned(logs, []string{member1}, t0, t0, t0.Add(10*time.Second))
	if len(r.Violations) != 0 {
		t.Fatalf("violations %+v; want none", r.Violations)
	}
	if st := r.Ownership; st.Lines != 12 || st.Creates != 2 || st.Writes != 3 {
		t.Fatalf("lines %d, creates %d, writes %d; want 12, 2 and 3", st.Lines, st.Creates, st.Writes)
	}
}

// A write on what someone else made is a violation naming the cluster,
// verb, resource, object and time; so is one on an object the controller
// made, that someone deleted and made again, and one whose create the log
// lacks. A create the API server refused makes nothing the controller's.
func TestOwnedViolations(t *testing.T) {
	logs := readLines(t, member1,
		auditLine(1, "create", harness, "services", "", "ns", "s00", 201),
		auditLine(2, "patch", ctlMember1, "services", "", "ns", "s00", 200),
		auditLine(3, "create", ctlMember1, slice, "", "ns", "imported-member2-s01", 201),
		auditLine(4, "delete", harness, slice, "", "ns", "imported-member2-s01", 200),
		auditLine(5, "create", harness, slice, "", "ns", "imported-member2-s01", 201),
		auditLine(6, "update", ctlMember1, slice, "", "ns", "imported-member2-s01", 200),
		auditLine(7, "delete", ctlMember1, "multicluster.x-k8s.io/serviceimports", "", "ns", "s02", 200),
		auditLine(8, "create", harness, "services", "", "ns", "derived-s03", 201),
		auditLine(9, "create", ctlMember1, "services", "", "ns", "derived-s03", 409),
		auditLine(10, "update", ctlMember1, "services", "", "ns", "derived-s03", 200),
		// A create that timed out takes nothing someone else made; an
		// update that timed out may have gone through.
		auditLine(11, "create", ctlMember1, "services", "", "ns", "s00", 504),
		auditLine(12, "update", ctlMember1, "services", "", "ns", "s00", 504),
	)
	var r Result
	r.Owned(logs, []string{member1}, t0, t0, t0.Add(time.Minute))
	want := []string{
		"member1: patch services ns/s00 by mcs-controller/member1 at 07:00:02.000000 (HTTP 200): made by " + harness,
		"member1: update endpointslices.discovery.k8s.io ns/imported-member2-s01 by mcs-controller/member1 at 07:00:06.000000 (HTTP 200): made by " + harness,
		"member1: delete serviceimports.multicluster.x-k8s.io ns/s02 by mcs-controller/member1 at 07:00:07.000000 (HTTP 200): no create of it in the audit log",
		"member1: update services ns/derived-s03 by mcs-controller/member1 at 07:00:10.000000 (HTTP 200): made by " + harness,
		"member1: update services ns/s00 by mcs-controller/member1 at 07:00:12.000000 (HTTP 504): made by " + harness,
	}
	if len(r.Violations) != len(want) {
		t.Fatalf("violations %+v; want %d", r.Violations, len(want))
	}
	wantAt := []time.Duration{2 * time.Second, 6 * time.Second, 7 * time.Second, 10 * time.Second, 12 * time.Second}
	for i, v := range r.Violations {
		if v.Invariant != "owned" || v.Detail != want[i] || v.Consumer != member1 || v.At != wantAt[i] {
			t.Errorf("violation %d: %+v; want owned in member1 at %s: %s", i, v, wantAt[i], want[i])
		}
	}
	if r.Ownership.Creates != 1 || r.Ownership.Writes != 5 {
		t.Errorf("creates %d, writes %d; want 1 (the refused one made nothing) and 5", r.Ownership.Creates, r.Ownership.Writes)
	}
}

// What the docs say the controller writes on others' objects passes and is
// counted by what it is: statuses, the MultiClusterService's finalizer (a
// patch), a member Secret's renewed token on the hub; the same verbs on
// anything else, or another verb on those, do not.
func TestOwnedDocumentedWrites(t *testing.T) {
	mcs := "mcs.coredns-mcs.io/multiclusterservices"
	export := "multicluster.x-k8s.io/serviceexports"
	hubLog := readLines(t, hub,
		auditLine(1, "create", harness, mcs, "", "ns", "s06", 201),
		auditLine(2, "patch", ctlHub, mcs, "", "ns", "s06", 200),
		auditLine(3, "update", ctlHub, mcs, "status", "ns", "s06", 200),
		auditLine(4, "update", ctlHub, "secrets", "", "mcs-system", "member1", 200),
		auditLine(5, "update", ctlHub, mcs, "", "ns", "s06", 200),
	)[hub]
	memberLog := readLines(t, member1,
		auditLine(1, "create", harness, export, "", "ns", "s00", 201),
		auditLine(2, "update", ctlMember1, export, "status", "ns", "s00", 200),
		auditLine(3, "update", ctlMember1, "secrets", "", "mcs-system", "x", 200),
		auditLine(4, "delete", ctlMember1, export, "", "ns", "s00", 200),
	)[member1]
	var r Result
	r.Owned(map[string][]auditv1.Event{hub: hubLog, member1: memberLog}, []string{hub, member1}, t0, t0, t0.Add(time.Minute))
	want := map[string]int{"MultiClusterService finalizer (a merge patch of the finalizers alone)": 1, "MultiClusterService status": 1,
		"a member's Secret, its token renewed": 1, "ServiceExport status": 1}
	if fmt.Sprint(r.Ownership.Documented) != fmt.Sprint(want) {
		t.Errorf("documented %v; want %v", r.Ownership.Documented, want)
	}
	var got []string
	for _, v := range r.Violations {
		got = append(got, v.Detail[:strings.Index(v.Detail, " by ")])
	}
	wantV := []string{"hub: update multiclusterservices.mcs.coredns-mcs.io ns/s06", "member1: update secrets mcs-system/x",
		"member1: delete serviceexports.multicluster.x-k8s.io ns/s00"}
	if strings.Join(got, "; ") != strings.Join(wantV, "; ") {
		t.Errorf("violations %q; want %q", got, wantV)
	}
}

// A cluster without an audit log is a violation: the invariant cannot be
// checked there, and the report must not read as if it were.
func TestOwnedNeedsEveryLog(t *testing.T) {
	var r Result
	r.Owned(readLines(t, hub, auditLine(1, "create", harness, "services", "", "ns", "s00", 201)), []string{hub, member1}, t0, t0, t0.Add(time.Minute))
	if len(r.Violations) != 1 || r.Violations[0].Consumer != member1 || !strings.Contains(r.Violations[0].Detail, "no audit log") {
		t.Fatalf("violations %+v; want one: member1 has no audit log", r.Violations)
	}
	if !strings.Contains(r.ownedRow(1), "| owned | 1 audit lines") {
		t.Errorf("report row %q", r.ownedRow(1))
	}
}

// A line that is not an audit event is an error naming the file and line;
// rotated logs are read with the current one, the events in time order.
func TestReadAudit(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("member1-audit.log", auditLine(3, "update", ctlMember1, slice, "", "ns", "a", 200))
	write("member1-audit-2026-11-29T06-59-00.000.log", auditLine(1, "create", ctlMember1, slice, "", "ns", "a", 201))
	logs, err := ReadAudit(dir)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	r.Owned(logs, []string{member1}, t0, t0, t0.Add(time.Minute))
	if len(r.Violations) != 0 || r.Ownership.Lines != 2 || r.Ownership.Writes != 1 {
		t.Fatalf("violations %+v, stats %+v; want the rotated log's create to own the update", r.Violations, r.Ownership)
	}
	write("member2-audit.log", auditLine(1, "create", ctlMember1, slice, "", "ns", "a", 201), `{"kind":"Event",`)
	if _, err := ReadAudit(dir); err == nil || !strings.Contains(err.Error(), "member2-audit.log:2:") {
		t.Fatalf("error %v; want one naming member2-audit.log:2", err)
	}
}

// Lines recorded from member1's audit log in a run of seed 47: the
// controller makes an imported slice, the harness's edit-owned overwrites
// it and the controller writes it back; the harness makes a ServiceExport,
// the controller writes its status, the harness withdraws it and makes it
// again. Nothing is a violation; without the controller's create of the
// slice, its update of it is one.
func TestOwnedRecorded(t *testing.T) {
	logs, err := ReadAudit(filepath.Join("testdata", "audit"))
	if err != nil {
		t.Fatal(err)
	}
	events := logs[member1]
	from, to := events[0].StageTimestamp.Time, events[len(events)-1].StageTimestamp.Time
	var r Result
	r.Owned(logs, []string{member1}, from, from, to)
	want := map[string]int{"ServiceExport status": 2}
	if len(r.Violations) != 0 || r.Ownership.Creates != 1 || r.Ownership.Writes != 3 || fmt.Sprint(r.Ownership.Documented) != fmt.Sprint(want) {
		t.Fatalf("violations %+v, stats %+v; want none, 1 create, 3 writes, %v", r.Violations, r.Ownership, want)
	}
	var without []auditv1.Event
	for _, e := range events {
		if e.Verb != "create" {
			without = append(without, e)
		}
	}
	r = Result{}
	r.Owned(map[string][]auditv1.Event{member1: without}, []string{member1}, from, from, to)
	if len(r.Violations) != 1 {
		t.Fatalf("violations %+v; want the controller's update of a slice it did not create", r.Violations)
	}
	for _, v := range r.Violations {
		if !strings.Contains(v.Detail, "update endpointslices.discovery.k8s.io testchaos-seed-47-29958/imported-member1-s08-mx478 by mcs-controller/member1") ||
			!strings.HasSuffix(v.Detail, "no create of it in the audit log") {
			t.Errorf("violation %q", v.Detail)
		}
	}
}
