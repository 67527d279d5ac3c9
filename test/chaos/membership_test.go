package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// A member the hub registers no more provides nothing: its addresses in a
// consumer's import are a mismatch, and the other provider's are what the
// import must hold.
func TestAwayMemberProvidesNothing(t *testing.T) {
	s := Service{Name: "s", MCS: true, Strategy: api.RemoteAndLocal, Providers: []string{member1, member3}, Consumers: []string{member2}}
	m := sampleAt(0, []string{"10.10.0.1"})
	m.All["s"][member3], m.Ready["s"][member3] = []string{"10.14.0.1"}, []string{"10.14.0.1"}
	m.Imported[member2]["s"][member3] = []string{"10.14.0.1"}
	if bad := m.Mismatch(s, member2); bad != "" {
		t.Fatalf("both joined: %s, want a match", bad)
	}
	m.Away = []string{member1}
	if got := m.Providers(s); len(got) != 1 || got[0] != member3 {
		t.Errorf("providers with member1 away: %v, want [member3]", got)
	}
	if bad := m.Mismatch(s, member2); !strings.Contains(bad, "from member1, which does not provide") {
		t.Errorf("member1's addresses imported while it is away: %q, want a mismatch naming member1", bad)
	}
	delete(m.Imported[member2]["s"], member1)
	if bad := m.Mismatch(s, member2); bad != "" {
		t.Errorf("member3's addresses alone while member1 is away: %s, want a match", bad)
	}
}

// A member the hub registers no more consumes nothing: an import left
// there is a mismatch, none is a match, and its names need not answer,
// fault or no fault.
func TestAwayMemberConsumesNothing(t *testing.T) {
	var ss []Sample
	for at := time.Duration(0); at <= 60*time.Second; at += time.Second {
		m := sampleAt(at, nil)
		m.Away = []string{member2}
		ss = append(ss, m)
	}
	if bad := ss[0].Mismatch(oneService.Services[0], member2); bad != "" {
		t.Errorf("no import in member2 while it is away: %s, want a match", bad)
	}
	left := sampleAt(0, []string{"10.10.0.1"})
	left.Away = []string{member2}
	if bad := left.Mismatch(oneService.Services[0], member2); !strings.Contains(bad, "ServiceImport present true, model false") {
		t.Errorf("an import left in member2 while it is away: %q, want a mismatch", bad)
	}
	r := Check(oneService, testLimits, ss, []Probe{miss(30 * time.Second)}, nil, nil, nil)
	if r.Checked != 0 || r.Misses != 0 {
		t.Errorf("checked %d, misses %d; want member2's names not checked while it is away", r.Checked, r.Misses)
	}
}

// A member still unregistered at the end of the run is the harness's
// failure (a rejoin that never joined again), named as such.
func TestMemberAwayAtTheEndIsAHarnessViolation(t *testing.T) {
	ss := samples(60*time.Second, -1, -1)
	ss[len(ss)-1].Away = []string{member3}
	r := Check(oneService, testLimits, ss, nil, nil, nil, nil)
	if len(r.Violations) != 1 || r.Violations[0].Invariant != "harness" || !strings.Contains(r.Violations[0].Detail, "member3 is not joined") {
		t.Fatalf("violations %+v, want one of harness naming member3", r.Violations)
	}
	ss[len(ss)-1].Away = nil
	if r := Check(oneService, testLimits, ss, nil, nil, nil, nil); len(r.Violations) != 0 {
		t.Fatalf("every member joined at the end: violations %+v, want none", r.Violations)
	}
}

// A member's token revoked or its registration taken back never starts
// while a server fault or a partition of that member is under way, nor one
// of those within the time the membership fault may outlast its For.
func TestPlanKeepsMembershipFaultsApart(t *testing.T) {
	w := NewWorld(20)
	seen := 0
	for seed := range uint64(20) {
		evs := Plan(testConfig(seed), w)
		for i, e := range evs {
			if e.Kind != RevokeToken && e.Kind != Rejoin {
				continue
			}
			seen++
			for j, g := range evs {
				if j == i || g.Cluster != e.Cluster || g.For == 0 {
					continue
				}
				gEnd := g.At + g.For + overrun(g)
				if g.At < e.At+e.For+membershipOverrun && e.At < gEnd {
					t.Errorf("seed %d: %v and %v hold %s at once", seed, e, g, e.Cluster)
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("no membership fault in 20 plans")
	}
}
