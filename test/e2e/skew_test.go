//go:build lab

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// olderCommit is the older side of the version skew docs/operations.md
// ("Version skew") promises: mcs-controller and coredns-mcs of this commit
// run against this tree's. It is a commit of main's own history, so that a
// fresh clone of main has it and the test needs no registry or tag: the
// end of session 21, before the controller's one-owner refactor and the
// plugin's exact ports, the last state a full CI run passed before them.
// Once a release is tagged, set it to the last release's commit
// (git rev-parse vX.Y.Z^{commit}) in the release's commit.
const olderCommit = "9440f1e2180104d5be951a26b9bb96f767c0cb42"

// olderBinaries builds coredns-mcs and mcs-controller of olderCommit into
// _output/skew/<commit>, once per clone: git archive of the commit, then
// go build as make build builds, which takes the unchanged dependencies
// from Go's build cache. It fails, never skips, when the clone lacks the
// commit.
func olderBinaries(t *testing.T) (coredns, controller string) {
	t.Helper()
	root := labtest.Get(t).Root()
	out := filepath.Join(root, "_output", "skew", olderCommit)
	coredns, controller = filepath.Join(out, "coredns-mcs"), filepath.Join(out, "mcs-controller")
	_, errDNS := os.Stat(coredns)
	if _, err := os.Stat(controller); err == nil && errDNS == nil {
		return coredns, controller
	}
	if b, err := exec.Command("git", "-C", root, "cat-file", "-e", olderCommit+"^{commit}").CombinedOutput(); err != nil {
		t.Fatalf("the version skew test's older build, commit %s (olderCommit in test/e2e/skew_test.go), is not in this clone (%v: %s): "+
			"it must be a commit of main's history, and the clone must have that history (not a shallow clone)", olderCommit, err, b)
	}
	src := filepath.Join(out, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	build := fmt.Sprintf(`set -euo pipefail
git -C %[1]q archive %[2]s | tar -x -C %[3]q
cd %[3]q
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=%[2]s" -o %[4]q/ ./cmd/coredns-mcs ./cmd/mcs-controller`, root, olderCommit, src, out)
	if b, err := exec.Command("bash", "-c", build).CombinedOutput(); err != nil {
		t.Fatalf("building coredns-mcs and mcs-controller of %s: %v\n%s", olderCommit, err, b)
	}
	t.Logf("built coredns-mcs and mcs-controller of %s in %s", olderCommit, time.Since(started).Round(time.Second))
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	return coredns, controller
}

// An upgrade and its rollback, each program in turn, as docs/operations.md
// ("Version skew") says either may go first: the older controller and
// coredns-mcs; the controller upgraded under the older coredns-mcs; then
// coredns-mcs upgraded and the controller rolled back under it. At each
// step member1 scales foo, and member2's coredns-mcs must answer foo's
// native and clusterset names with the derived VIP and the pods of the
// new scale: what the controller of that step wrote, read by the
// coredns-mcs of that step.
func TestVersionSkew(t *testing.T) {
	olderDNS, olderController := olderBinaries(t)
	l := labtest.Get(t)
	ns := l.Namespace(t)
	l.InstallCRDs(t) // a fresh lab's hub has no MultiClusterService CRD yet
	l.NamedNamespace(t, ownNamespace(ns), labtest.Hub)
	l.Workload(t, m1, ns, "foo", 1, false)
	l.Apply(t, labtest.Hub, labtest.MultiClusterService(ns, "foo", api.LocalFirst, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}))

	steps := []struct {
		name                string
		controller, coredns string
		replicas            int32
	}{
		{"older controller, older coredns-mcs", olderController, olderDNS, 2},
		{"newer controller, older coredns-mcs", controllerBinary(t), olderDNS, 3},
		{"older controller, newer coredns-mcs", olderController, binary(t), 1},
	}
	var ctl *controller
	var dnsProc *coredns
	var ctlBin, dnsBin string
	for _, s := range steps {
		t.Logf("%s", s.name)
		if s.controller != ctlBin {
			if ctl != nil {
				if err := ctl.Stop(10 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			ctl, ctlBin = launchControllerBinary(t, s.controller, ns), s.controller
			ctl.waitReady(t)
		}
		if s.coredns != dnsBin {
			if dnsProc != nil {
				if err := dnsProc.Stop(10 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
			dnsProc, dnsBin = startCoreDNS(t, config{context: m2, cluster: m2, blocks: []block{vipBlock, endpointsBlock}, binary: s.coredns}), s.coredns
			dnsProc.waitReady(t, startTimeout)
		}
		l.Workload(t, m1, ns, "foo", s.replicas, false)
		vip, endpoints := dnsProc.servers[0], dnsProc.servers[1]
		name := native("foo", ns)
		derived := clusterIP(t, m2, ns, api.DerivedPrefix+"foo")
		vip.expectWithin(t, converge, name, dns.TypeA, answer(vip.addrs(name, derived)))
		vip.expectWithin(t, converge, clusterset("foo", ns), dns.TypeA, answer(vip.addrs(clusterset("foo", ns), derived)))
		endpoints.expectWithin(t, converge, name, dns.TypeA, answer(endpoints.addrs(name, readyIPs(t, m1, ns, "foo", int(s.replicas))...)))
		if t.Failed() {
			t.Fatalf("%s: the answers above are wrong", s.name)
		}
	}
}
