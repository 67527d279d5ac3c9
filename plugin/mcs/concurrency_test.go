package mcs

import (
	"context"
	"sync"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// TestQueriesDuringUpdates queries while the informers deliver changes; run
// with -race. Every answer must be one of the two states, never a mix.
func TestQueriesDuringUpdates(t *testing.T) {
	f := newFixture(t, baseConfig(), scenario{"LocalFirst", false, true, true, readyLocal, readyRemote}.objects()...)
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
				got := addresses(rec.Msg)
				if !equal(got, vipLocal) && !equal(got, vipSet) {
					t.Errorf("unexpected answer %v", got)
					return
				}
			}
		})
	}
	api := f.kube.DiscoveryV1().EndpointSlices("demo")
	for i := range 50 {
		eps := readyLocal
		if i%2 == 0 {
			eps = notReadyLocal
		}
		if _, err := api.Update(t.Context(), localSlice("demo", "serve", "serve-abc", nil, eps...), metav1UpdateOptions); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
}
