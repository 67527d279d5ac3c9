//go:build lab

package main

import (
	"net/netip"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// The lab's pod CIDRs (test/lab/README.md): an address names its cluster.
var podCIDRs = map[string]netip.Prefix{
	member1: netip.MustParsePrefix("10.10.0.0/16"),
	member2: netip.MustParsePrefix("10.12.0.0/16"),
	member3: netip.MustParsePrefix("10.14.0.0/16"),
}

// serveReply is the reply of serve, the MCS API demo's image
// (sigs.k8s.io/mcs-api, demo/), as the lab's pods play it.
var serveReply = regexp.MustCompile(`^hello from cluster (member[0-9]) \(Node: kwok-node-0 Pod: (serve-[a-z0-9-]+) Address: ([0-9.]+)\)$`)

// TestDemo plays make demo's story on the lab, in namespace demo, and
// checks what its reader is told: the DNS answers are the VIPs of the
// Services that should serve, and every request went through member2's
// kube-proxy to the pods that should answer: member1's in step 5, both
// clusters' in step 6, member2's in step 7, then member1's once member2 was
// scaled to 0, then member2's again.
func TestDemo(t *testing.T) {
	l := labtest.Get(t)
	l.Network(t)
	s, err := newStory(l.Root(), t.Output())
	if err != nil {
		t.Fatal(err)
	}
	// make demo leaves its processes running; a test does not.
	t.Cleanup(func() {
		for _, name := range processNames() {
			if err := process.StopPIDFile(s.pidPath(name), process.StopGrace); err != nil {
				t.Error(err)
			}
		}
	})
	res, err := s.play(t.Context())
	if err != nil {
		t.Fatalf("the demo failed: %v", err)
	}

	clusterIPs := func(name string) []string {
		t.Helper()
		ips, err := s.clusterIPs(t.Context(), member2, name)
		if err != nil {
			t.Fatal(err)
		}
		return ips
	}
	derived := clusterIPs(api.DerivedPrefix + svcName)
	if !slices.Equal(res.NativeAnswer, derived) || !slices.Equal(res.ClusterSetAnswer, derived) || !slices.Equal(res.ServiceImportIPs, derived) {
		t.Errorf("step 4: %s answered %v, %s %v, the ServiceImport has %v; want derived-serve's ClusterIPs %v",
			nativeName, res.NativeAnswer, clustersetName, res.ClusterSetAnswer, res.ServiceImportIPs, derived)
	}
	local := clusterIPs(svcName)

	// Step 5: every reply from member1, over each of its pods.
	for what, replies := range map[string][]Reply{"step 5 native": res.Spread, "step 5 clusterset": res.ClusterSet} {
		pods := map[string]bool{}
		for _, r := range replies {
			pods[checkReply(t, r, member1, derived)] = true
		}
		if what == "step 5 native" && (len(pods) != 2 || len(replies) < 5) {
			t.Errorf("%s: %d replies from pods %v; want a few from each of member1's 2 pods", what, len(replies), pods)
		}
	}

	// Step 6: RemoteAndLocal spreads connections over both clusters.
	perCluster := map[string]int{}
	for _, r := range res.Split {
		checkReply(t, r, r.Cluster, derived)
		perCluster[r.Cluster]++
	}
	if perCluster[member1] == 0 || perCluster[member2] == 0 || perCluster[member1]+perCluster[member2] != splitRequests {
		t.Errorf("step 6: replies per cluster %v, want both clusters and no failure in %d", perCluster, splitRequests)
	}
	t.Logf("step 6: replies per cluster %v", perCluster)

	// Step 7: member2's own Service while it has pods, derived-serve once
	// it has none.
	for _, r := range res.Local {
		checkReply(t, r, member2, local)
	}
	if len(res.Local) < 5 {
		t.Errorf("step 7: %d replies from member2, want a few", len(res.Local))
	}
	checkSwitch(t, "scaled to 0", res.Failover, res.FailoverAfter, member1, derived)
	checkSwitch(t, "scaled back", res.Back, res.BackAfter, member2, local)

	// Step 8: answers of endpoints, so every reply comes from the pod
	// address DNS answered; member2's own at 3 pods, member3's alone
	// below the minimum, then member1's, then member2's again.
	for _, r := range res.Tuned {
		checkPod(t, r, member2)
	}
	for _, sw := range []struct {
		what    string
		replies []Reply
		after   time.Duration
		to      string
	}{{"member2 at 1", res.ToMember3, res.ToMember3After, member3}, {"member3 at 0", res.ToMember1, res.ToMember1After, member1}, {"member2 at 2", res.TunedBack, res.TunedBackAfter, member2}} {
		checkPodSwitch(t, sw.what, sw.replies, sw.after, sw.to)
	}
	if !slices.Equal(res.TunedVIP, res.Member3VIP) || len(res.Member3VIP) == 0 {
		t.Errorf("step 8: member2's VIP coredns-mcs answered %v below the minimum, want member3's provider Service's %v", res.TunedVIP, res.Member3VIP)
	}
	for _, r := range res.TunedVIPReq {
		checkReply(t, r, member3, res.Member3VIP)
	}
	if len(res.TunedVIPReq) < 3 {
		t.Errorf("step 8: %d replies through member3's provider VIP, want a few", len(res.TunedVIPReq))
	}
}

// checkPod checks that r is serve's reply from the pod of cluster at
// the address DNS answered.
func checkPod(t *testing.T, r Reply, cluster string) {
	t.Helper()
	m := serveReply.FindStringSubmatch(r.Text)
	if m == nil || m[1] != cluster || m[3] != r.Addr {
		t.Errorf("reply %q from %s: want the pod of %s at that address", r.Text, r.Addr, cluster)
	}
}

// checkPodSwitch checks a switch to cluster to, answered by endpoints: the
// last reply is the first from to, and no reply came from a cluster after
// to in the order of step 8 or from a third one before it.
func checkPodSwitch(t *testing.T, what string, replies []Reply, after time.Duration, to string) {
	t.Helper()
	if len(replies) == 0 {
		t.Errorf("%s: no reply", what)
		return
	}
	checkPod(t, replies[len(replies)-1], to)
	for _, r := range replies[:len(replies)-1] {
		if r.Cluster == to {
			t.Errorf("%s: reply %q before the switch to %s", what, r.Text, to)
		}
	}
	if after <= 0 || after > 30*time.Second {
		t.Errorf("%s: switched after %s, want a few seconds at most", what, after)
	}
	t.Logf("%s: %d replies, the first from %s after %s", what, len(replies), to, after)
}

// checkReply checks that r is serve's reply from a pod of cluster,
// through a connection to one of vips, and returns the pod's name.
func checkReply(t *testing.T, r Reply, cluster string, vips []string) string {
	t.Helper()
	m := serveReply.FindStringSubmatch(r.Text)
	if m == nil {
		t.Errorf("reply %q through %s is not serve's reply", r.Text, r.Addr)
		return ""
	}
	if m[1] != cluster || !podCIDRs[cluster].Contains(netip.MustParseAddr(m[3])) || !slices.Contains(vips, r.Addr) {
		t.Errorf("reply %q through %s: want a pod of %s (%s) through %v", r.Text, r.Addr, cluster, podCIDRs[cluster], vips)
	}
	return m[2]
}

// checkSwitch checks a switch to cluster to: the last reply is the first
// from to through one of vips, within seconds.
func checkSwitch(t *testing.T, what string, replies []Reply, after time.Duration, to string, vips []string) {
	t.Helper()
	if len(replies) == 0 {
		t.Errorf("%s: no reply", what)
		return
	}
	last := replies[len(replies)-1]
	checkReply(t, last, to, vips)
	for _, r := range replies[:len(replies)-1] {
		if r.Cluster == to && slices.Contains(vips, r.Addr) {
			t.Errorf("%s: reply %q through %s before the switch to %s", what, r.Text, r.Addr, to)
		}
	}
	if after <= 0 || after > 30*time.Second {
		t.Errorf("%s: switched after %s, want a few seconds at most", what, after)
	}
	t.Logf("%s: %d replies, the first from %s after %s", what, len(replies), to, after)
}
