//go:build lab

// Package e2e runs bin/coredns-mcs, the real binary, against member1 of the
// local lab: the tests write Services, EndpointSlices, ServiceImports and
// Leases into member1's API and check the answers of a real DNS client.
//
// Run with the lab's other tests: make build && go test -race -tags lab -p 1 ./...
package e2e

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

func TestMain(m *testing.M) {
	labtest.Main(m)
}

// Cluster names of this run. CoreDNS talks to the lab's member1, but the
// names it knows itself and the source clusters by carry a suffix: a
// source-<cluster> Lease is cluster-wide, and one left behind by another
// package's run (expired, so stale) must not change these answers.
var (
	runID   = fmt.Sprintf("%05d", rand.IntN(100000))
	self    = "member1-" + runID
	member2 = "member2-" + runID
	member3 = "member3-" + runID
)
