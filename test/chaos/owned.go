package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The owned invariant: the controller never changes or deletes an object
// it did not create. The API servers' audit logs (test/lab/README.md,
// "Audit logs") say who created each object and every update, patch and
// delete the controller sent; nothing of it is the controller's own word.

// controllerAgent begins the user agent of every request mcs-controller
// sends: mcs-controller/hub to the hub, mcs-controller/<member> to a member
// (cmd/mcs-controller, controller/members). On the hub it holds the lab's
// one token, as the harness does (in members, the account join made), so
// the agent, not the user, tells the controller's requests from the
// harness's (labtest) and the control plane's.
const controllerAgent = "mcs-controller/"

// OwnedStats are the owned invariant's numbers.
type OwnedStats struct {
	// From and To bound the writes checked: the run's set-up to its end.
	// Who created an object is read from the whole log.
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Lines: audit lines read, every cluster's.
	Lines int `json:"lines"`
	// Creates: the controller's creates that took effect.
	Creates int `json:"creates"`
	// Writes: its updates, patches and deletes that took or may have
	// taken effect, each checked; Documented: those of them on objects it
	// did not create that the docs say it writes, by what.
	Writes     int            `json:"writes"`
	Documented map[string]int `json:"documented"`
}

// documented are the writes the docs say the controller makes on objects
// it did not create (docs/concepts.md, "What is written where, and why";
// controller/README.md, "What it writes"), as the code sends them. A slice
// carrying the controller's label that another made is deleted too (its
// orphans): not listed, as the run makes none, so that one deleted shows.
var documented = []struct {
	what, group, resource, subresource string
	verbs                              []string
	hubOnly                            bool
}{
	{"MultiClusterService status", api.GroupName, "multiclusterservices", "status", []string{"update"}, true},
	{"MultiClusterService finalizer (a merge patch of the finalizers alone)", api.GroupName, "multiclusterservices", "", []string{"patch"}, true},
	{"a member's Secret, its token renewed", "", "secrets", "", []string{"update"}, true},
	{"ServiceExport status", mcsv1beta1.GroupName, "serviceexports", "status", []string{"update"}, false},
	{"a ServiceImport someone else made, filled in", mcsv1beta1.GroupName, "serviceimports", "", []string{"update"}, false},
	{"a ServiceImport someone else made, its status filled in", mcsv1beta1.GroupName, "serviceimports", "status", []string{"update"}, false},
	{"its Leases", "coordination.k8s.io", "leases", "", []string{"update", "patch", "delete"}, false},
}

// documentedWrite is what the docs call e on cluster's object, false when
// they do not name it.
func documentedWrite(cluster string, e auditv1.Event) (string, bool) {
	o := e.ObjectRef
	for _, d := range documented {
		if d.group == o.APIGroup && d.resource == o.Resource && d.subresource == o.Subresource &&
			slices.Contains(d.verbs, e.Verb) && (!d.hubOnly || cluster == hub) {
			return d.what, true
		}
	}
	return "", false
}

// Owned checks the controller's writes in each cluster's audit log, logs
// by cluster: every update, patch or delete it made between from and to
// targets an object whose last create was its own (across recreations:
// the harness deletes the controller's objects, and the controller makes
// them again), or is one the docs name. Only what took effect, or may
// have, counts: a write the API server refused (4xx: a conflict, a
// precondition, not found) changed nothing and a create refused made
// nothing, but one it failed to answer (5xx: a timeout while etcd was
// frozen) may have gone through. start is the run's time 0.
func (r *Result) Owned(logs map[string][]auditv1.Event, clusters []string, from, start, to time.Time) {
	st := &OwnedStats{From: from, To: to, Documented: map[string]int{}}
	r.Ownership = st
	for _, c := range clusters {
		events, ok := logs[c]
		if !ok {
			r.Violations = append(r.Violations, Violation{Invariant: "owned", At: to.Sub(start), Consumer: c,
				Detail: c + " has no audit log: the lab runs without them (started with LAB_AUDIT=0: make lab-down, then make lab-up or make chaos)"})
			continue
		}
		st.Lines += len(events)
		r.ownedIn(c, events, st, start)
	}
}

// object is an object of one cluster, by resource, namespace and name.
type object struct{ group, resource, namespace, name string }

func (r *Result) ownedIn(cluster string, events []auditv1.Event, st *OwnedStats, start time.Time) {
	events = slices.Clone(events)
	slices.SortStableFunc(events, func(a, b auditv1.Event) int { return a.StageTimestamp.Time.Compare(b.StageTimestamp.Time) })
	creator := map[object]string{} // the user agent of each object's last create
	for _, e := range events {
		if e.Stage != auditv1.StageResponseComplete || e.ObjectRef == nil || e.ResponseStatus == nil {
			continue
		}
		effect := outcome(e.ResponseStatus.Code)
		if effect == refused {
			continue
		}
		o := e.ObjectRef
		k := object{o.APIGroup, o.Resource, o.Namespace, o.Name}
		at := e.StageTimestamp.Time
		checked := strings.HasPrefix(e.UserAgent, controllerAgent) && !at.Before(st.From) && !at.After(st.To)
		if created(e) {
			// A create that may have gone through made the object only
			// if no one is known to have: had it existed, it would
			// have been refused.
			if effect == tookEffect || creator[k] == "" {
				creator[k] = e.UserAgent
			}
			if checked && effect == tookEffect {
				st.Creates++
			}
			continue
		}
		if !checked || !slices.Contains([]string{"update", "patch", "delete", "deletecollection"}, e.Verb) {
			continue
		}
		st.Writes++
		if strings.HasPrefix(creator[k], controllerAgent) {
			continue
		}
		if what, ok := documentedWrite(cluster, e); ok {
			st.Documented[what]++
			continue
		}
		r.Violations = append(r.Violations, Violation{Invariant: "owned", At: at.Sub(start), Consumer: cluster,
			Service: o.Namespace + "/" + o.Name, Detail: ownedDetail(cluster, e, creator[k])})
	}
}

// effect is what a request did, as its answer's code says.
type effect int

const (
	refused    effect = iota // 4xx (or no answer the log shows): nothing
	tookEffect               // 2xx
	mayHave                  // 5xx: the server failed to answer, the write may be in etcd
)

func outcome(code int32) effect {
	switch {
	case code >= 200 && code < 300:
		return tookEffect
	case code >= 500:
		return mayHave
	}
	return refused
}

// created: e made an object, or may have: a create, or an update or apply
// that found none (201); a create of a subresource (a token, a binding)
// makes none, and one named by the server alone (generateName) is no
// one's to track.
func created(e auditv1.Event) bool {
	if e.ObjectRef.Subresource != "" || e.ObjectRef.Name == "" {
		return false
	}
	return e.Verb == "create" || e.ResponseStatus.Code == 201 && (e.Verb == "update" || e.Verb == "patch")
}

func ownedDetail(cluster string, e auditv1.Event, creator string) string {
	o := e.ObjectRef
	res := o.Resource
	if o.APIGroup != "" {
		res += "." + o.APIGroup
	}
	if o.Subresource != "" {
		res += "/" + o.Subresource
	}
	made := "made by " + creator
	if creator == "" {
		made = "no create of it in the audit log"
	}
	return fmt.Sprintf("%s: %s %s %s/%s by %s at %s (HTTP %d): %s", cluster, e.Verb, res, o.Namespace, o.Name, e.UserAgent,
		e.StageTimestamp.UTC().Format("15:04:05.000000"), e.ResponseStatus.Code, made)
}

// ownedRow is the report's line of the owned invariant.
func (r Result) ownedRow(violations int) string {
	st := r.Ownership
	if st == nil {
		return "| owned | not checked (no audit logs read) | - |\n"
	}
	var docs []string
	for _, k := range slices.Sorted(maps.Keys(st.Documented)) {
		docs = append(docs, fmt.Sprintf("%s %d", k, st.Documented[k]))
	}
	if len(docs) == 0 {
		docs = []string{"none"}
	}
	return fmt.Sprintf("| owned | %d audit lines; the controller's %d creates, %d updates, patches and deletes checked, of which on objects it did not create as the docs allow: %s | %d |\n",
		st.Lines, st.Creates, st.Writes, strings.Join(docs, ", "), violations)
}

// auditSuffix ends the name of a cluster's audit log, and of the rotated
// ones (<cluster>-audit-<time>.log), as the lab writes them.
const auditSuffix = "-audit"

// ReadAudit reads every audit log in dir, <cluster>-audit*.log, by cluster.
func ReadAudit(dir string) (map[string][]auditv1.Event, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*"+auditSuffix+"*.log"))
	if err != nil {
		return nil, err
	}
	out := map[string][]auditv1.Event{}
	for _, p := range paths {
		cluster, _, _ := strings.Cut(filepath.Base(p), auditSuffix)
		events, err := readAuditFile(p)
		if err != nil {
			return nil, err
		}
		out[cluster] = append(out[cluster], events...)
	}
	return out, nil
}

func readAuditFile(path string) ([]auditv1.Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []auditv1.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var e auditv1.Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("%s:%d: not an audit event: %w", path, line, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
