//go:build lab

package chaos

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// memLimits are each component's memory limit as the project ships it,
// read from kustomize builds of deploy/: the controller's from the hub
// overlay (deploy/controller's Deployment), each member's CoreDNS from its
// overlay; member3 has none, so its limit is the member base's
// (deploy/member), which every member overlay builds on.
func memLimits(t *testing.T, l *labtest.Lab, w World) map[string]int64 {
	limit := func(dir, deployment, container string) int64 {
		n, err := MemoryLimit(labtest.Kustomize(t, filepath.Join(l.Root(), dir)), deployment, container)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		return n
	}
	out := map[string]int64{controllerComponent: limit("deploy/overlays/hub", "mcs-controller", "mcs-controller")}
	for _, m := range members {
		dir := "deploy/member"
		if slices.Contains(w.PodDNS, m) {
			dir = filepath.Join("deploy/overlays", m)
		}
		out[dnsComponent(m)] = limit(dir, "coredns", "coredns")
	}
	return out
}

// memLoop reads, about once a second, the memory of every controller
// replica and every coredns-mcs: the pods of the lab's kubelet and
// member3's process.
func (r *run) memLoop(ctx context.Context) {
	// The lab's kubelet tells a pod its cluster by the API server's
	// address (KUBERNETES_SERVICE_HOST).
	byHost := map[string]string{}
	for _, m := range r.w.PodDNS {
		u, err := url.Parse(r.l.Config(r.t, m).Host)
		if err != nil {
			r.t.Errorf("%s's API server: %v", m, err)
			return
		}
		byHost[u.Hostname()] = m
	}
	for ctx.Err() == nil {
		r.readMemory(byHost)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// procfs is where the harness reads processes' memory.
const procfs = "/proc"

func (r *run) readMemory(byHost map[string]string) {
	type proc struct {
		pid             int
		component, name string
	}
	var procs []proc
	r.mu.Lock()
	for _, rp := range r.replicas {
		procs = append(procs, proc{rp.p.Pid(), controllerComponent, fmt.Sprintf("mcs-controller pid %d", rp.p.Pid())})
	}
	r.mu.Unlock()
	pid := r.procDNS.Pid()
	procs = append(procs, proc{pid, dnsComponent(member3), fmt.Sprintf("member3 coredns-mcs pid %d", pid)})
	for _, p := range PodProcesses(procfs, "coredns-mcs") {
		if m, ok := byHost[p.APIServer]; ok {
			procs = append(procs, proc{p.PID, dnsComponent(m), fmt.Sprintf("%s %s pid %d", m, p.Pod, p.PID)})
		}
	}
	at := r.now()
	var read []MemSample
	for _, p := range procs {
		// A process that exited since is skipped: the kill is the fault's.
		if rss, peak, err := ProcMem(procfs, p.pid); err == nil {
			read = append(read, MemSample{At: at, Component: p.component, Process: p.name, RSS: rss, Peak: peak})
		}
	}
	r.mu.Lock()
	r.mem = append(r.mem, read...)
	r.mu.Unlock()
}
