package chaos

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

const mi = int64(1 << 20)

// memSamples are a process's readings once a second in [from, to), with
// rss until half and rss2 after, and peak as VmHWM throughout.
func memSamples(component, process string, from, to time.Duration, rss, rss2, peak int64) []MemSample {
	var out []MemSample
	for at := from; at < to; at += time.Second {
		r := rss
		if at >= from+(to-from)/2 {
			r = rss2
		}
		out = append(out, MemSample{At: at, Component: component, Process: process, RSS: r * mi, Peak: peak * mi})
	}
	return out
}

// A process whose peak RSS passed its component's limit is a violation
// naming it, its peak and the limit, even when no reading caught the RSS
// above it (VmHWM did); a component none of whose processes was read is one
// too. Growth compares the first and last minute of a process that ran
// through both.
func TestLeanMemory(t *testing.T) {
	limits := map[string]int64{controllerComponent: 100 * mi, dnsComponent(member1): 50 * mi, dnsComponent(member3): 50 * mi}
	var ss []MemSample
	ss = append(ss, memSamples(controllerComponent, "mcs-controller pid 1", 0, 120*time.Second, 60, 70, 80)...)
	ss = append(ss, memSamples(controllerComponent, "mcs-controller pid 2", 0, 30*time.Second, 40, 40, 40)...)
	ss = append(ss, memSamples(controllerComponent, "mcs-controller pid 2", 30*time.Second, 40*time.Second, 90, 90, 120)...)
	ss = append(ss, memSamples(dnsComponent(member1), "member1 coredns-a pid 7", 0, 120*time.Second, 30, 30, 50)...)
	var r Result
	r.LeanMemory(ss, limits, 120*time.Second)

	want := []Violation{
		{Invariant: "lean", At: 120 * time.Second, Detail: "no memory reading of coredns-mcs member3: the harness found none of its processes"},
		{Invariant: "lean", At: 30 * time.Second, Detail: "mcs-controller pid 2 (mcs-controller) peaked at 120.0 MiB RSS, over its limit of 100.0 MiB"},
	}
	if !slices.Equal(r.Violations, want) {
		t.Errorf("violations %+v; want %+v", r.Violations, want)
	}
	ctl := r.Memory[controllerComponent]
	if ctl.Limit != 100*mi || ctl.Peak != 120*mi || ctl.PeakProcess != "mcs-controller pid 2" || ctl.Processes != 2 || ctl.ProcessPeaks["mcs-controller pid 1"] != 80*mi {
		t.Errorf("controller %+v; want limit 100, peak 120 MiB by pid 2, of 2 processes, pid 1's 80", ctl)
	}
	// pid 2 did not run in the last minute: pid 1's growth, 60 to 70 MiB.
	if ctl.GrowthProcess != "mcs-controller pid 1" || ctl.FirstMinute != 60*mi || ctl.LastMinute != 70*mi {
		t.Errorf("controller growth %+v; want pid 1's, 60 to 70 MiB", ctl)
	}
	// At the limit is within it.
	if dns := r.Memory[dnsComponent(member1)]; dns.Peak != 50*mi || dns.FirstMinute != 30*mi || dns.LastMinute != 30*mi {
		t.Errorf("member1's CoreDNS %+v; want peak 50 MiB, 30 MiB in both minutes", dns)
	}
}

func TestMemoryTable(t *testing.T) {
	md := Report{Config: testConfig(47), Result: Result{Memory: map[string]MemStats{
		dnsComponent(member1): {Limit: 384 * mi, Peak: 40 * mi, PeakProcess: "member1 coredns-a pid 7", Processes: 2,
			GrowthProcess: "member1 coredns-a pid 7", FirstMinute: 30 * mi, LastMinute: 35 * mi},
		dnsComponent(member3): {Limit: 384 * mi, Peak: 20 * mi, PeakProcess: "member3 coredns-mcs pid 9", Processes: 2},
	}}}.Markdown()
	for _, want := range []string{
		"| coredns-mcs member1 | 384 | 40.0 | member1 coredns-a pid 7 | 2 | 30.0 / 35.0, +5.0 (member1 coredns-a pid 7) |",
		"| coredns-mcs member3 | 384 | 20.0 | member3 coredns-mcs pid 9 | 2 | no process ran through both |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("the report lacks %q:\n%s", want, md)
		}
	}
	if md := (Report{}).Markdown(); !strings.Contains(md, "Memory was not measured") {
		t.Errorf("a report without memory readings does not say so:\n%s", md)
	}
}

// The limits come from the manifests the project ships, as kustomize
// builds them; a Deployment, container or limit that is not there is an
// error that names it.
func TestMemoryLimit(t *testing.T) {
	for _, c := range []struct{ dir, deployment, container string }{
		{"deploy/overlays/hub", "mcs-controller", "mcs-controller"},
		{"deploy/overlays/member1", "coredns", "coredns"},
		{"deploy/overlays/member2", "coredns", "coredns"},
		{"deploy/member", "coredns", "coredns"},
	} {
		n, err := MemoryLimit(labtest.Kustomize(t, filepath.Join("..", "..", c.dir)), c.deployment, c.container)
		if err != nil || n <= 0 {
			t.Errorf("%s: limit %d, %v; want the Deployment's memory limit", c.dir, n, err)
		}
	}
	deployment := func(limits map[string]any) []*unstructured.Unstructured {
		return []*unstructured.Unstructured{{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": "coredns"},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"containers": []any{
				map[string]any{"name": "coredns", "resources": map[string]any{"limits": limits}}}}}}}}}
	}
	if n, err := MemoryLimit(deployment(map[string]any{"memory": "384Mi"}), "coredns", "coredns"); n != 384*mi || err != nil {
		t.Errorf("384Mi: %d, %v", n, err)
	}
	for _, c := range []struct {
		objs                  []*unstructured.Unstructured
		deployment, container string
		want                  string
	}{
		{deployment(map[string]any{"cpu": "1"}), "coredns", "coredns", "Deployment coredns, container coredns: no memory limit"},
		{deployment(nil), "coredns", "sidecar", "Deployment coredns has no container sidecar"},
		{deployment(nil), "mcs-controller", "mcs-controller", "no Deployment mcs-controller"},
	} {
		if _, err := MemoryLimit(c.objs, c.deployment, c.container); err == nil || err.Error() != c.want {
			t.Errorf("error %v; want %q", err, c.want)
		}
	}
}

func writeProc(t *testing.T, proc, pid, file, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, pid, file), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestProcMem(t *testing.T) {
	rss, peak, err := ProcMem("/proc", os.Getpid())
	if err != nil || rss <= 0 || peak < rss {
		t.Errorf("this test's own: RSS %d, peak %d, %v; want RSS > 0 and peak >= RSS", rss, peak, err)
	}
	proc := t.TempDir()
	writeProc(t, proc, "7", "status", "Name:\tcoredns-mcs\nVmHWM:\t  51200 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n")
	if rss, peak, err := ProcMem(proc, 7); rss != 40*mi || peak != 50*mi || err != nil {
		t.Errorf("RSS %d, peak %d, %v; want 40 and 50 MiB", rss, peak, err)
	}
	writeProc(t, proc, "2", "status", "Name:\tkthreadd\nThreads:\t1\n")
	if _, _, err := ProcMem(proc, 2); err == nil || !strings.Contains(err.Error(), "pid 2: no VmRSS and VmHWM") {
		t.Errorf("a kernel thread: %v; want no VmRSS and VmHWM", err)
	}
	if _, _, err := ProcMem(proc, 4); err == nil {
		t.Error("a process that is gone: no error")
	}
}

// Only the named processes that the lab's kubelet runs, which have their
// cluster's API server in their environment, are a pod's.
func TestPodProcesses(t *testing.T) {
	proc := t.TempDir()
	env := "PATH=/bin\x00KUBERNETES_SERVICE_HOST=127.0.11.1\x00HOSTNAME=coredns-a\x00"
	writeProc(t, proc, "10", "comm", "coredns-mcs\n")
	writeProc(t, proc, "10", "environ", env)
	writeProc(t, proc, "11", "comm", "coredns-mcs\n") // member3's, started by the harness
	writeProc(t, proc, "11", "environ", "PATH=/bin\x00")
	writeProc(t, proc, "12", "comm", "labctl\n")
	writeProc(t, proc, "12", "environ", env)
	writeProc(t, proc, "self", "comm", "coredns-mcs\n")
	writeProc(t, proc, "13", "comm", "coredns-mcs\n") // exited before its environment was read
	got := PodProcesses(proc, "coredns-mcs")
	if want := []PodProcess{{PID: 10, APIServer: "127.0.11.1", Pod: "coredns-a"}}; !slices.Equal(got, want) {
		t.Errorf("pod processes %+v; want %+v", got, want)
	}
}
