package mcs

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// TestQueriesDuringUpdates queries while the informers deliver changes; run
// with -race. Every answer must be one of the two states, never a mix, and
// the readers must see each state the writer flips to: the writer waits
// for that before it flips again.
func TestQueriesDuringUpdates(t *testing.T) {
	f := newFixture(t, baseConfig(), scenario{strategy: "LocalFirst", localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}.objects()...)
	const (
		local  = 1 // answered VIP_local: the local slice is ready
		remote = 2 // answered VIP_set: it is not
	)
	var last atomic.Int32    // the state the readers saw last
	var seen [3]atomic.Int64 // answers per state
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := new(dns.Msg)
				r.SetQuestion(serveName, dns.TypeA)
				rec := dnstest.NewRecorder(&test.ResponseWriter{})
				if _, err := f.m.ServeDNS(context.Background(), rec, r); err != nil || rec.Msg == nil {
					t.Errorf("no answer: %v", err)
					return
				}
				state := int32(0)
				switch got := addresses(rec.Msg); {
				case equal(got, vipLocal):
					state = local
				case equal(got, vipSet):
					state = remote
				default:
					t.Errorf("unexpected answer %v", got)
					return
				}
				seen[state].Add(1)
				last.Store(state)
			}
		})
	}
	api := f.kube.DiscoveryV1().EndpointSlices("demo")
	const flips = 50
	for i := range flips {
		eps, want := readyLocal, int32(local)
		if i%2 == 0 {
			eps, want = notReadyLocal, remote
		}
		if _, err := api.Update(t.Context(), localSlice("demo", "serve", "serve-abc", nil, eps...), metav1UpdateOptions); err != nil {
			t.Fatal(err)
		}
		f.waitFor(func() bool { return last.Load() == want || t.Failed() }, "the readers to see the update")
	}
	close(stop)
	wg.Wait()
	// Every flip was seen: at least one answer per flip in each state.
	if n, m := seen[local].Load(), seen[remote].Load(); n < flips/2 || m < flips/2 {
		t.Fatalf("answers: %d VIP_local, %d VIP_set over %d flips; the readers missed updates", n, m, flips)
	}
}
