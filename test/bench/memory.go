package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// RSS samples: once a process is ready and -settle has passed, rssSamples
// readings one second apart; the largest is reported.
const rssSamples = 10

// memoryReading is one process's resident memory holding the objects.
type memoryReading struct {
	rss   int64 // max VmRSS over the samples, bytes
	hwm   int64 // VmHWM at the last sample: the peak, during the initial sync
	ready time.Duration
}

// peak is the most the process held: its high-water mark, or a later
// sample should the heap have grown past it since.
func (m memoryReading) peak() int64 { return max(m.rss, m.hwm) }

// memoryResult is every process measured, by name.
type memoryResult map[string]memoryReading

// memProc is a process of the memory comparison.
type memProc struct{ name, corefile string }

// memoryComparison is a ratio the report shows: the measured process's
// figure over the reference's, with a bound when it is a target (0: shown
// only).
type memoryComparison struct {
	what                string
	measured, reference string
	max                 float64
	figure              func(memoryReading) int64
}

func (m memoryReading) resident() int64 { return m.rss }

// Process names of the memory comparison that the query contests use too.
const (
	procKubernetes = "kubernetes"
	procMCSOnly    = "mcs-only"
	procMember     = "member"
	procStock      = "stock"
	procMemberAll  = "member-all"
)

// memoryComparisons are the report's memory rows, in order. The member
// Corefile is held to the target by its peak too: once synced, mcs returns
// the initial lists' garbage to the OS (plugin/mcs returnSyncGarbage),
// which stock CoreDNS does not, so that its RSS alone would flatter it.
var memoryComparisons = []memoryComparison{
	{"RSS, mcs alone vs kubernetes with multicluster", procMCSOnly, procKubernetes, maxRSSRatio, memoryReading.resident},
	{"RSS, member Corefile vs stock kubeadm Corefile", procMember, procStock, maxMemberRatio, memoryReading.resident},
	{"peak RSS (VmHWM), member Corefile vs stock kubeadm Corefile", procMember, procStock, maxMemberRatio, memoryReading.peak},
	{"RSS, member Corefile vs the same without its labels line (the kubernetes plugin reading every slice)", procMember, procMemberAll, 0, memoryReading.resident},
}

// afterLoad is the member Corefile's row once the query contests and the
// failovers have run: the heap has grown back towards its bound under
// queries, on both sides.
var afterLoad = memoryComparison{"RSS after the query contests and failovers, member Corefile vs stock kubeadm Corefile", procMember, procStock, maxMemberRatio, memoryReading.resident}

// memoryGroups are the processes compared, a group at a time: the processes
// of a group start at once, and a group starts once the one before is
// sampled, so that each initial list competes with as few others for the
// API server and the two cores as the comparison allows.
func memoryGroups(c memberCorefileSet) [][]memProc {
	return [][]memProc{
		{{procKubernetes, corefileKubernetes}, {procMCSOnly, corefileMCS}},
		{{procMember, c.member}, {procStock, c.stock}, {procMemberAll, c.all}},
	}
}

// compareMemory starts each group, waits until its processes are ready and
// -settle has passed, then samples them. The processes are left running,
// by name: the query contests and the answer comparison use some of them.
func compareMemory(ctx context.Context, o options, servers *fleet, groups [][]memProc) (memoryResult, map[string]*server, error) {
	res, procs := memoryResult{}, map[string]*server{}
	for _, g := range groups {
		var started []*server
		for _, p := range g {
			s, err := servers.launch(p.name, p.corefile)
			if err != nil {
				return nil, nil, err
			}
			procs[p.name] = s
			started = append(started, s)
		}
		if err := sampleMemory(ctx, o, started, res); err != nil {
			return nil, nil, err
		}
	}
	return res, procs, nil
}

// sampleMemory records into res the readings of procs once every one of
// them is ready and -settle has passed.
func sampleMemory(ctx context.Context, o options, procs []*server, res memoryResult) error {
	for _, s := range procs {
		if err := s.waitReady(ctx); err != nil {
			return err
		}
	}
	log.Printf("sampling RSS in %s", o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return err
	}
	for range rssSamples {
		for _, s := range procs {
			m := res[s.Name()]
			if err := m.sample(s); err != nil {
				return err
			}
			res[s.Name()] = m
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	for _, s := range procs {
		m := res[s.Name()]
		m.ready = s.ready
		res[s.Name()] = m
		log.Printf("RSS of %s: %s, peak %s", s.Name(), mib(m.rss), mib(m.hwm))
	}
	return nil
}

func (m *memoryReading) sample(s *server) error {
	st, err := process.StatusKB(fmt.Sprintf("/proc/%d/status", s.Pid()))
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	m.rss = max(m.rss, st["VmRSS"])
	m.hwm = st["VmHWM"]
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
