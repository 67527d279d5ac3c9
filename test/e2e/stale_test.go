//go:build lab

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// TestStaleSourceCluster: a source cluster whose Lease has expired is left
// out while another cluster has ready endpoints, and used when none has;
// its endpoints come back when the Lease is renewed.
func TestStaleSourceCluster(t *testing.T) {
	srv := startServers(t)
	s := srv.vip
	for _, strategy := range []string{localFirst, remoteAndLocal} {
		t.Run(strategy, func(t *testing.T) {
			f := newFixture(t)
			staleGauge := leasesSettled(t, f)
			fresh, stale := ep("10.12.4.1").named("db-0"), ep("10.14.4.1").named("db-0")
			f.apply(
				f.serviceImport("db", importSpec{headless: true, strategy: strategy}),
				f.importedSlice("db", member2, fresh),
				f.importedSlice("db", member3, stale),
			)
			native, clusterset := f.native("db"), f.clusterset("db")
			s.expect(t, native, dns.TypeA, answer(s.addrs(native, fresh.ip, stale.ip)))

			f.lease(member3, time.Now().Add(-time.Hour), 10)
			f.lease(member2, time.Now(), 3600)
			s.expect(t, native, dns.TypeA, answer(s.addrs(native, fresh.ip)))
			s.expect(t, clusterset, dns.TypeA, answer(s.addrs(clusterset, fresh.ip)))
			staleName := f.clusterset("db-0", member3, "db")
			s.expect(t, staleName, dns.TypeA, answer(s.addrs(staleName, stale.ip)))
			srv.proc.expectMetric(t, series("coredns_mcs_stale_clusters"), staleGauge+1)

			f.apply(f.importedSlice("db", member2, fresh.unready()))
			s.expect(t, native, dns.TypeA, answer(s.addrs(native, stale.ip)))
			s.expect(t, clusterset, dns.TypeA, answer(s.addrs(clusterset, stale.ip)))

			f.apply(f.importedSlice("db", member2, fresh))
			f.lease(member3, time.Now(), 3600)
			s.expect(t, native, dns.TypeA, answer(s.addrs(native, fresh.ip, stale.ip)))
			srv.proc.expectMetric(t, series("coredns_mcs_stale_clusters"), staleGauge)
		})
	}
}

// leasesSettled waits until no Lease in the fixture's cluster expires
// within the next minute, and returns how many of its source Leases have
// expired: the stale gauge counts every cluster, and the Leases of a
// controller an earlier test stopped expire on their own (20 s after it
// stopped), so the test's expectations start from what the API holds,
// not from a scrape, which may come before the gauge's first update.
func leasesSettled(t *testing.T, f *fixture) float64 {
	t.Helper()
	client := f.lab.Client(t, f.cluster)
	var expired float64
	labtest.Eventually(t, 90*time.Second, func(ctx context.Context) error {
		leases, err := client.CoordinationV1().Leases(api.LeaseNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		now := time.Now()
		expired = 0
		for _, l := range leases.Items {
			if !strings.HasPrefix(l.Name, api.LeasePrefix) || l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
				continue
			}
			expires := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
			switch {
			case expires.Before(now):
				expired++
			case expires.Before(now.Add(time.Minute)):
				return fmt.Errorf("Lease %s expires at %s", l.Name, expires.Format(time.RFC3339))
			}
		}
		return nil
	})
	return expired
}
