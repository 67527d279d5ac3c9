package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/controller/shards"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

// runMain makes the test binary run mcs-controller's main instead of the
// tests, so that a test can watch the real process exit.
const runMain = "MCS_CONTROLLER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMain) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func kubeconfigFile(t *testing.T, name, context, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
users: [{name: u, user: {token: abc}}]
contexts: [{name: %q, context: {cluster: c, user: u}}]
current-context: %q
`, server, context, context)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// A --clusters-kubeconfig whose context cannot name a cluster (kubeadm's
// kubernetes-admin@kubernetes) fails the start, before the hub is
// contacted at all: the process exits 1 and its last line says the fix.
func TestBadClustersKubeconfigFailsAtStart(t *testing.T) {
	var requests atomic.Int32
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "the hub was contacted", http.StatusInternalServerError)
	}))
	defer hub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0],
		"--kubeconfig", kubeconfigFile(t, "hub", "hub", hub.URL),
		"--clusters-kubeconfig", kubeconfigFile(t, "members", "kubernetes-admin@kubernetes", "https://127.0.0.1:1"),
		"--http-address", "127.0.0.1:0", "--leader-elect=true")
	cmd.Env = append(os.Environ(), runMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("mcs-controller ended with %v, want exit code 1; stderr:\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "config rename-context kubernetes-admin@kubernetes kubernetes-admin-kubernetes") {
		t.Errorf("last line %q, want the fix", last)
	}
	if n := requests.Load(); n > 0 {
		t.Errorf("the hub got %d requests, want none", n)
	}
}

// Shard flags that cannot work fail the start with the flag named, before
// any cluster is contacted; so do renewal flags that would renew a token
// as soon as it is made.
func TestBadShardFlagsFailAtStart(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shards", "0"}, "--shards 0: want 1 to 64"},
		{[]string{"--shards", "65"}, "--shards 65: want 1 to 64"},
		{[]string{"--max-shards", "-1"}, "--max-shards -1: want 0, or a bound"},
		{[]string{"--shards", "4", "--max-shards", "2", "--leader-elect=false"}, "--max-shards 2: want 0, or a bound on the shards a replica takes with --leader-elect"},
		{[]string{"--renew-credentials-before", "720h"}, "--renew-credentials-before 720h0m0s, --credential-duration 720h0m0s: want a renewal point of 0 (never) or more, before a longer duration"},
		{[]string{"--renew-credentials-before", "-1h"}, "--renew-credentials-before -1h0m0s"},
	} {
		failsAtStart(t, "https://127.0.0.1:1", tt.args, tt.want)
	}
}

// failsAtStart runs mcs-controller with args and a hub at hubURL, and
// fails the test unless it exits 1 saying want.
func failsAtStart(t *testing.T, hubURL string, args []string, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], append(args, "--kubeconfig", kubeconfigFile(t, "hub", "hub", hubURL), "--http-address", "127.0.0.1:0")...)
	cmd.Env = append(os.Environ(), runMain+"=1")
	out, err := cmd.CombinedOutput()
	if exit := (*exec.ExitError)(nil); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("%v: ended with %v, want exit code 1; output:\n%s", args, err, out)
		return
	}
	if !strings.Contains(string(out), want) {
		t.Errorf("%v: output lacks %q:\n%s", args, want, out)
	}
}

// ClusterProfile flags that cannot work, an access-provider file that
// cannot be used among them, fail the start with the flag, the file and
// what is wrong in it named, before the hub is contacted.
func TestBadClusterProfileFlagsFailAtStart(t *testing.T) {
	var requests atomic.Int32
	hub := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		http.Error(w, "the hub was contacted", http.StatusInternalServerError)
	}))
	defer hub.Close()
	noCommand := filepath.Join(t.TempDir(), "providers.json")
	if err := os.WriteFile(noCommand, []byte(`{"providers": [{"name": "secretreader", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster-profile-namespace", "fleet"}, "--cluster-profile-namespace fleet: needs --cluster-profile-provider-file"},
		{[]string{"--cluster-profile-provider-file", noCommand}, "--cluster-profile-provider-file is set, but not --cluster-profile-namespace"},
		{[]string{"--cluster-profile-namespace", "fleet", "--cluster-profile-provider-file", noCommand}, "--cluster-profile-provider-file: access-provider file " + noCommand + `: providers[0] (\"secretreader\"): execConfig.command is empty`},
	} {
		failsAtStart(t, hub.URL, tt.args, tt.want)
	}
	if n := requests.Load(); n > 0 {
		t.Errorf("the hub got %d requests, want none", n)
	}
}

// -logging-format=json makes every line a JSON object, as log pipelines
// read Kubernetes components' logs: the same start failure as above ends
// with an object whose message and error say what failed and the fix.
func TestJSONLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "--logging-format=json",
		"--kubeconfig", kubeconfigFile(t, "hub", "hub", "https://127.0.0.1:1"),
		"--clusters-kubeconfig", kubeconfigFile(t, "members", "kubernetes-admin@kubernetes", "https://127.0.0.1:1"),
		"--http-address", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), runMain+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatalf("mcs-controller started with a bad --clusters-kubeconfig; stderr:\n%s", stderr.String())
	}
	var last map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		last = nil
		if err := json.Unmarshal([]byte(line), &last); err != nil {
			t.Fatalf("a line that is not JSON: %q (%v)", line, err)
		}
	}
	if last["msg"] != "mcs-controller failed" || !strings.Contains(fmt.Sprint(last["err"]), "config rename-context kubernetes-admin@kubernetes") {
		t.Errorf("last line %v, want the failure and its fix", last)
	}
}

// A leader whose work fails gives the lead up for a standby, and returns
// the error, so that the process exits with it.
func TestFailedWorkReleasesTheLead(t *testing.T) {
	hub := k8sfake.NewSimpleClientset()
	f := &flags{namespace: "mcs-system", shards: 1, leaseDuration: 2 * time.Second, renewDeadline: time.Second, retryPeriod: 100 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		done <- leaderElect(context.Background(), f, hub, shards.NewSet(1), make(chan int, 1), func(context.Context) error { return errors.New("no members") })
	}()
	select {
	case err := <-done:
		if err == nil || err.Error() != "no members" {
			t.Fatalf("leaderElect returned %v, want the work's error", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("leaderElect still leads after its work failed")
	}
	lease, err := hub.CoordinationV1().Leases("mcs-system").Get(context.Background(), "mcs-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %s", *h)
	}
}

// Only the replica that has taken shard 0 records Events on member
// Secrets: one Warning per refused Secret, not one per replica.
func TestShardZeroRecordsEvents(t *testing.T) {
	fake := record.NewFakeRecorder(10)
	set := shards.NewSet(2)
	rec := shardZeroRecorder{fake, set}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "member-x"}}
	emit := func() {
		rec.Event(secret, corev1.EventTypeWarning, "Refused", "one")
		rec.Eventf(secret, corev1.EventTypeWarning, "Refused", "%s", "two")
		rec.AnnotatedEventf(secret, nil, corev1.EventTypeWarning, "Refused", "%s", "three")
	}
	set.Want(1)
	emit()
	if n := len(fake.Events); n != 0 {
		t.Fatalf("the holder of shard 1 recorded %d events, want none", n)
	}
	set.Want(0)
	emit()
	if n := len(fake.Events); n != 3 {
		t.Fatalf("the holder of shard 0 recorded %d events, want 3", n)
	}
	if got := <-fake.Events; got != "Warning Refused one" {
		t.Errorf("event %q", got)
	}
}
