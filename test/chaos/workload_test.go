package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// twoProviders is a MultiClusterService whose Service runs in member1 and
// member2, each with a ready endpoint, consumed by every member.
var twoProviders = World{Services: []Service{{Name: "s", MCS: true, Strategy: api.RemoteAndLocal, Providers: []string{member1, member2}, Consumers: members}}}

// listed reads s's MultiClusterService with the provision and consumption
// lists given (nil: none listed), member3 importing imported (source ->
// addresses; nil: no import).
func listed(at time.Duration, provision, consumption []string, imported map[string][]string) Sample {
	m := Sample{At: at, Up: map[string]bool{hub: true, member1: true, member2: true, member3: true},
		Ready:     map[string]map[string][]string{"s": {member1: {"10.10.0.1"}, member2: {"10.12.0.1"}}},
		All:       map[string]map[string][]string{"s": {member1: {"10.10.0.1"}, member2: {"10.12.0.1"}}},
		MCS:       map[string]bool{"s": true},
		Provision: map[string][]string{"s": provision}, Consumption: map[string][]string{"s": consumption},
		Imports: map[string][]string{}, Imported: map[string]map[string]map[string][]string{}}
	if imported != nil {
		m.Imports[member3] = []string{"s"}
		m.Imported[member3] = map[string]map[string][]string{"s": imported}
	}
	return m
}

// A provider dropped from the provision list provides no more: its ready
// endpoints do not make the service served, and a consumer that still
// imports them differs from the model until they are withdrawn.
func TestModelFollowsProvisionList(t *testing.T) {
	s := twoProviders.Services[0]
	both := map[string][]string{member1: {"10.10.0.1"}, member2: {"10.12.0.1"}}
	if m := listed(0, nil, nil, both); !slices.Equal(m.Providers(s), []string{member1, member2}) || m.Mismatch(s, member3) != "" {
		t.Fatalf("none listed: providers %v, mismatch %q; want both members that have the Service, matched", m.Providers(s), m.Mismatch(s, member3))
	}
	m := listed(0, []string{member2}, nil, both)
	if !slices.Equal(m.Providers(s), []string{member2}) {
		t.Fatalf("providers %v; want member2 alone, as listed", m.Providers(s))
	}
	if bad := m.Mismatch(s, member3); !strings.Contains(bad, "from member1, which does not provide") {
		t.Fatalf("mismatch %q; want member1's addresses named as not provided", bad)
	}
	if bad := listed(0, []string{member2}, nil, map[string][]string{member2: {"10.12.0.1"}}).Mismatch(s, member3); bad != "" {
		t.Fatalf("mismatch %q once member1's addresses are withdrawn; want none", bad)
	}
	m.Ready["s"][member2] = nil
	if m.Serving(s) {
		t.Fatal("served by member1's ready endpoints, which member1 no longer provides")
	}
}

// The consumption list says where s is imported: as listed, every member
// when none is listed, the world's in a recording that did not read it.
func TestModelFollowsConsumptionList(t *testing.T) {
	s := twoProviders.Services[0]
	m := listed(0, nil, []string{member1}, nil)
	if !m.Consumes(s, member1) || m.Consumes(s, member3) {
		t.Fatal("consumption list [member1]: want member1 alone to import")
	}
	if m := listed(0, nil, nil, nil); !m.Consumes(s, member3) {
		t.Fatal("none listed: want every member to import")
	}
	s.Consumers = []string{member2}
	m = listed(0, nil, nil, nil)
	delete(m.Consumption, "s")
	if !m.Consumes(s, member2) || m.Consumes(s, member3) {
		t.Fatal("a recording without the lists: want the world's consumers")
	}
}

// While s's MultiClusterService is gone nothing imports it and no name of
// it must answer; once made again, its names must answer once it settled.
func TestMultiClusterServiceGoneForAWhile(t *testing.T) {
	s := twoProviders.Services[0]
	both := map[string][]string{member1: {"10.10.0.1"}, member2: {"10.12.0.1"}}
	var ss []Sample
	for at := time.Duration(0); at <= 60*time.Second; at += time.Second {
		m := listed(at, nil, []string{member3}, both)
		if at >= 10*time.Second && at < 20*time.Second {
			delete(m.MCS, "s")
			m.Imports, m.Imported = map[string][]string{}, map[string]map[string]map[string][]string{}
		}
		ss = append(ss, m)
	}
	if bad := ss[12].Mismatch(s, member3); bad != "" || ss[12].Consumes(s, member3) {
		t.Fatalf("while gone: mismatch %q; want no import, as the model has none", bad)
	}
	stale := listed(12*time.Second, nil, nil, both)
	delete(stale.MCS, "s")
	if bad := stale.Mismatch(s, member3); !strings.Contains(bad, "ServiceImport present true, model false") {
		t.Fatalf("an import left while gone: mismatch %q; want it named", bad)
	}
	probe := func(at time.Duration) Probe {
		return Probe{At: at, Consumer: member3, Service: "s", Name: "native", Rcode: "NXDOMAIN"}
	}
	remade := Applied{Event: Event{Kind: RecreateMCS, Service: "s", For: 10 * time.Second}, Start: 10 * time.Second, Heal: 20 * time.Second}
	r := Check(twoProviders, testLimits, ss, []Probe{probe(15 * time.Second), probe(22 * time.Second), probe(30 * time.Second)}, []Applied{remade}, nil, nil)
	if r.Checked != 1 || len(r.Violations) != 1 || r.Violations[0].At != 30*time.Second {
		t.Fatalf("checked %d, violations %+v; want the miss at 30 s alone, 10 s after it was made again", r.Checked, r.Violations)
	}
	if r.Workload[RecreateMCS] != 1 {
		t.Fatalf("workload %v; want the recreate counted", r.Workload)
	}
}

// A change that took a while to be carried out (its API server hung) may
// have landed at its end: no miss is checked until Settle after it.
func TestMissWhileAChangeLandsLateIsNotChecked(t *testing.T) {
	ss := samples(60*time.Second, -1, -1)
	scale := Applied{Event: Event{Kind: Scale, Service: "s", Cluster: member1}, Start: 10 * time.Second, Heal: 18 * time.Second}
	r := Check(oneService, testLimits, ss, []Probe{miss(20 * time.Second), miss(24 * time.Second)}, []Applied{scale}, nil, nil)
	if r.Checked != 1 || len(r.Violations) != 1 || r.Violations[0].At != 24*time.Second {
		t.Fatalf("checked %d, violations %+v; want the miss at 24 s alone", r.Checked, r.Violations)
	}
}

// The report counts the workload by kind, and names a run's shards.
func TestMarkdownWorkloadAndShards(t *testing.T) {
	cfg := testConfig(47)
	cfg.Shards = 2
	r := Report{Config: cfg, Limits: testLimits, World: oneService,
		Result: Result{Workload: map[string]int{Scale: 5, Roll: 2}, WorkloadFailed: map[string]int{SetProvision: 1}}}
	md := r.Markdown()
	for _, want := range []string{"Workload: 7 changes (5 scale, 2 roll, 0 toggle-export", "could not be carried out: 1 set-provision",
		"3 replicas with `--shards 2`", "`SHARDS=2 SEED=47 "} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
}
