//go:build lab

package main

import (
	"maps"
	"net/netip"
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

func TestMain(m *testing.M) { labtest.Main(m) }

// The lab's pod CIDRs (test/lab/README.md): an address names its cluster.
var podCIDRs = map[string]netip.Prefix{
	member1: netip.MustParsePrefix("10.10.0.0/16"),
	member2: netip.MustParsePrefix("10.12.0.0/16"),
}

// seedsReply is the seeds' serve image's reply.
var seedsReply = regexp.MustCompile(`^hello from cluster (member[0-9]) \(Node: kwok-node-0 Pod: (serve-[a-z0-9-]+) Address: ([0-9.]+)\)$`)

// TestDemo plays make demo's story on the lab, in namespace demo, and
// checks what its reader is told: the DNS answers, that the replies of step
// 5 came from member1's pods, that step 6's came from member2's, then
// member1's once member2 was scaled to 0, then member2's again.
func TestDemo(t *testing.T) {
	l := labtest.Get(t)
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
	if res.NoNetns != "" {
		t.Fatalf("steps 5 and 6 sent no request: %s (CI runs as root, which can make a network namespace)", res.NoNetns)
	}

	member1Pods := readyPods(t, member1)
	if want := sortIPs(slices.Collect(maps.Keys(member1Pods))); !slices.Equal(res.NativeAnswer, want) {
		t.Errorf("%s answered %v in member2, want member1's pods %v", nativeName, res.NativeAnswer, want)
	}
	derived, err := l.Client(t, member2).CoreV1().Services(namespace).Get(t.Context(), "derived-serve", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ClusterSetAnswer) == 0 || !slices.Equal(res.ClusterSetAnswer, sortIPs(derived.Spec.ClusterIPs)) {
		t.Errorf("%s answered %v, want derived-serve's ClusterIPs %v", clustersetName, res.ClusterSetAnswer, derived.Spec.ClusterIPs)
	}

	// Step 5: every reply from a pod of member1, each pod in turn.
	seen := map[string]bool{}
	for _, r := range res.Spread {
		pod := checkReply(t, r, member1)
		if pod != "" && member1Pods[r.Addr] != pod {
			t.Errorf("step 5: reply %q: member1's pod at %s is %q", r.Text, r.Addr, member1Pods[r.Addr])
		}
		seen[pod] = true
	}
	if len(seen) != len(member1Pods) || len(res.Spread) < 5 {
		t.Errorf("step 5: %d replies from pods %v; want a few from each of member1's %d pods", len(res.Spread), seen, len(member1Pods))
	}

	// Step 6: member2 while it has pods, member1 once it has none.
	for _, r := range res.Local {
		checkReply(t, r, member2)
	}
	if len(res.Local) < 5 {
		t.Errorf("step 6: %d replies from member2, want a few", len(res.Local))
	}
	checkSwitch(t, "scaled to 0", res.Failover, res.FailoverAfter, member2, member1)
	checkSwitch(t, "scaled back", res.Back, res.BackAfter, member1, member2)
}

// checkReply checks that r is the seeds' reply from a pod of cluster at the
// address DNS answered, and returns the pod's name.
func checkReply(t *testing.T, r Reply, cluster string) string {
	t.Helper()
	m := seedsReply.FindStringSubmatch(r.Text)
	if m == nil {
		t.Errorf("reply %q from %s is not the seeds' serve reply", r.Text, r.Addr)
		return ""
	}
	if m[1] != cluster || m[3] != r.Addr || !podCIDRs[cluster].Contains(netip.MustParseAddr(r.Addr)) {
		t.Errorf("reply %q from %s: want a pod of %s (%s) at the address DNS answered", r.Text, r.Addr, cluster, podCIDRs[cluster])
	}
	return m[2]
}

// checkSwitch checks a switch from cluster from to cluster to: the last
// reply is the first from to, after replies from from or failures, within
// seconds.
func checkSwitch(t *testing.T, what string, replies []Reply, after time.Duration, from, to string) {
	t.Helper()
	if len(replies) == 0 {
		t.Errorf("%s: no reply", what)
		return
	}
	last := replies[len(replies)-1]
	checkReply(t, last, to)
	for _, r := range replies[:len(replies)-1] {
		if r.Cluster != from && r.Cluster != "" {
			t.Errorf("%s: reply %q before the switch to %s", what, r.Text, to)
		}
	}
	if after <= 0 || after > 30*time.Second {
		t.Errorf("%s: switched after %s, want a few seconds at most", what, after)
	}
	t.Logf("%s: %d replies, the first from %s after %s", what, len(replies), to, after)
}

// readyPods maps the addresses of cluster's ready serve pods to their
// names, as the lab's API says.
func readyPods(t *testing.T, cluster string) map[string]string {
	t.Helper()
	list, err := labtest.Get(t).Client(t, cluster).CoreV1().Pods(namespace).List(t.Context(), metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		t.Fatal(err)
	}
	pods := map[string]string{}
	for _, p := range list.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
				pods[p.Status.PodIP] = p.Name
			}
		}
	}
	return pods
}
