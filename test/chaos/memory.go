package chaos

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// MemSample is one reading of a process's memory from procfs.
type MemSample struct {
	At time.Duration `json:"at"`
	// Component is what one memory limit applies to: mcs-controller, or
	// coredns-mcs of a member (dnsComponent).
	Component string `json:"component"`
	// Process names the process: its pod or replica and its pid.
	Process string `json:"process"`
	// RSS is VmRSS, Peak VmHWM (the most RSS it has had since it started,
	// between readings too), in bytes.
	RSS  int64 `json:"rss"`
	Peak int64 `json:"peak"`
}

// MemStats are a component's memory over a run, in bytes.
type MemStats struct {
	Limit       int64  `json:"limit"`
	Peak        int64  `json:"peak"`
	PeakProcess string `json:"peakProcess,omitempty"`
	Processes   int    `json:"processes"`
	// ProcessPeaks: each process's peak RSS.
	ProcessPeaks map[string]int64 `json:"processPeaks,omitempty"`
	// Growth: of the component's processes that ran in both the run's
	// first and last minute, the one whose mean RSS grew most, and its
	// means then (a leak shows here before it meets the limit).
	GrowthProcess string `json:"growthProcess,omitempty"`
	FirstMinute   int64  `json:"firstMinute,omitempty"`
	LastMinute    int64  `json:"lastMinute,omitempty"`
}

// Components of the memory half: the controller, and each member's
// coredns-mcs, whose limit comes from that member's manifests.
const controllerComponent = "mcs-controller"

func dnsComponent(member string) string { return "coredns-mcs " + member }

// growthWindow is how long the first and the last stretch of the run are
// whose RSS growth compares.
const growthWindow = time.Minute

// LeanMemory is the lean invariant's memory half: no process's peak RSS above
// its component's memory limit as the project ships it (limits, in
// bytes, by component). A process over it is a violation naming it, its
// peak and the limit; so is a component of limits the run never read,
// whose processes the harness did not find. End is the run's length.
func (r *Result) LeanMemory(samples []MemSample, limits map[string]int64, end time.Duration) {
	r.Memory = map[string]MemStats{}
	byComponent := map[string]map[string][]MemSample{}
	for _, s := range samples {
		if byComponent[s.Component] == nil {
			byComponent[s.Component] = map[string][]MemSample{}
		}
		byComponent[s.Component][s.Process] = append(byComponent[s.Component][s.Process], s)
	}
	for _, c := range slices.Sorted(maps.Keys(limits)) {
		procs := byComponent[c]
		st := MemStats{Limit: limits[c], Processes: len(procs), ProcessPeaks: map[string]int64{}}
		if len(procs) == 0 {
			r.Violations = append(r.Violations, Violation{Invariant: "lean", At: end,
				Detail: fmt.Sprintf("no memory reading of %s: the harness found none of its processes", c)})
		}
		growth := int64(0)
		for _, name := range slices.Sorted(maps.Keys(procs)) {
			ss := procs[name]
			peak, over := peakOf(ss, st.Limit)
			st.ProcessPeaks[name] = peak
			if peak > st.Peak {
				st.Peak, st.PeakProcess = peak, name
			}
			if over >= 0 {
				r.Violations = append(r.Violations, Violation{Invariant: "lean", At: over,
					Detail: fmt.Sprintf("%s (%s) peaked at %.1f MiB RSS, over its limit of %.1f MiB", name, c, mib(peak), mib(st.Limit))})
			}
			first, okFirst := meanRSS(ss, 0, growthWindow)
			last, okLast := meanRSS(ss, end-growthWindow, end+1)
			if okFirst && okLast && (st.GrowthProcess == "" || last-first > growth) {
				growth, st.GrowthProcess, st.FirstMinute, st.LastMinute = last-first, name, first, last
			}
		}
		r.Memory[c] = st
	}
}

// peakOf is the most RSS a process's readings show and when it first
// passed limit (-1: never).
func peakOf(ss []MemSample, limit int64) (peak int64, over time.Duration) {
	over = -1
	for _, s := range ss {
		p := max(s.Peak, s.RSS)
		peak = max(peak, p)
		if p > limit && over < 0 {
			over = s.At
		}
	}
	return peak, over
}

// meanRSS is the mean RSS of the readings in [from, to); false when none.
func meanRSS(ss []MemSample, from, to time.Duration) (int64, bool) {
	var sum, n int64
	for _, s := range ss {
		if s.At >= from && s.At < to {
			sum += s.RSS
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / n, true
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// memoryTable is the memory half of the report: each component's peak
// against its limit, and its growth over the run.
func memoryTable(mem map[string]MemStats) string {
	if len(mem) == 0 {
		return "Memory was not measured in this run.\n"
	}
	var b strings.Builder
	b.WriteString("Memory (lean), RSS from /proc once a second; a peak over the limit is a violation:\n\n")
	b.WriteString("| component | limit (MiB) | peak RSS (MiB) | process at the peak | processes | mean RSS first / last minute (MiB), growth |\n|---|---|---|---|---|---|\n")
	for _, c := range slices.Sorted(maps.Keys(mem)) {
		st := mem[c]
		growth := "no process ran through both"
		if st.GrowthProcess != "" {
			growth = fmt.Sprintf("%.1f / %.1f, %+.1f (%s)", mib(st.FirstMinute), mib(st.LastMinute), mib(st.LastMinute-st.FirstMinute), st.GrowthProcess)
		}
		fmt.Fprintf(&b, "| %s | %.0f | %.1f | %s | %d | %s |\n", c, mib(st.Limit), mib(st.Peak), st.PeakProcess, st.Processes, growth)
	}
	return b.String()
}

// MemoryLimit is the memory limit, in bytes, of container in the
// Deployment named deployment among objs (a kustomize build): what a
// container's memory cgroup is held to, as the project ships it.
func MemoryLimit(objs []*unstructured.Unstructured, deployment, container string) (int64, error) {
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GetName() != deployment {
			continue
		}
		var d appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
			return 0, fmt.Errorf("Deployment %s: %w", deployment, err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name != container {
				continue
			}
			q, ok := c.Resources.Limits["memory"]
			if !ok {
				return 0, fmt.Errorf("Deployment %s, container %s: no memory limit", deployment, container)
			}
			return q.Value(), nil
		}
		return 0, fmt.Errorf("Deployment %s has no container %s", deployment, container)
	}
	return 0, fmt.Errorf("no Deployment %s", deployment)
}

// ProcMem reads a process's RSS and peak RSS, in bytes, from the status
// file of procfs (mounted at proc): VmRSS, resident anonymous, file-backed
// and shared memory, which a container's memory limit is charged and,
// page cache reclaimed, comes down to; and VmHWM, its most since the
// process started.
func ProcMem(proc string, pid int) (rss, peak int64, err error) {
	st, err := process.StatusKB(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, err
	}
	rss, okRSS := st["VmRSS"]
	peak, okPeak := st["VmHWM"]
	if !okRSS || !okPeak {
		return 0, 0, fmt.Errorf("pid %d: no VmRSS and VmHWM in its status (exited, or a kernel thread)", pid)
	}
	return rss, peak, nil
}

// PodProcess is a process of a pod the lab's kubelet runs.
type PodProcess struct {
	PID int
	// APIServer is its cluster's API server address, Pod its pod's name:
	// the environment the lab's kubelet gives every container
	// (KUBERNETES_SERVICE_HOST, HOSTNAME; test/lab/README.md, "Pods that run").
	APIServer, Pod string
}

// PodProcesses are the processes named comm (the executable's name) under
// procfs at proc that run in a pod of the lab's kubelet, those with
// KUBERNETES_SERVICE_HOST in their environment. A process that exits
// meanwhile is left out.
func PodProcesses(proc, comm string) []PodProcess {
	entries, _ := os.ReadDir(proc)
	var out []PodProcess
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		name, err := os.ReadFile(filepath.Join(proc, e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(name)) != comm {
			continue
		}
		env, err := os.ReadFile(filepath.Join(proc, e.Name(), "environ"))
		if err != nil {
			continue
		}
		p := PodProcess{PID: pid}
		for _, kv := range bytes.Split(env, []byte{0}) {
			k, v, _ := strings.Cut(string(kv), "=")
			switch k {
			case "KUBERNETES_SERVICE_HOST":
				p.APIServer = v
			case "HOSTNAME":
				p.Pod = v
			}
		}
		if p.APIServer != "" {
			out = append(out, p)
		}
	}
	return out
}
