package main

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"
)

// RSS samples: once a process is ready and -settle has passed, rssSamples
// readings one second apart; the largest is reported.
const rssSamples = 10

// memoryResult compares the resident memory of mcs alone with the
// kubernetes plugin's (multicluster on) holding the same objects.
type memoryResult struct {
	mcs, kube memoryReading
}

type memoryReading struct {
	rss   int64 // max VmRSS over the samples, bytes
	hwm   int64 // VmHWM at the last sample: the peak, during the initial sync
	ready time.Duration
}

// compareMemory starts both processes at once, waits until both are ready
// and -settle has passed, then samples them. The kubernetes process stays up
// for the query comparisons and is returned; the mcs-only one is stopped.
func compareMemory(ctx context.Context, o options, servers *fleet) (memoryResult, *server, error) {
	kube, err := servers.launch("kubernetes", corefileKubernetes)
	if err != nil {
		return memoryResult{}, nil, err
	}
	mcs, err := servers.launch("mcs-only", corefileMCS)
	if err != nil {
		return memoryResult{}, nil, err
	}
	res, err := sampleMemory(ctx, o, mcs, kube)
	if err != nil {
		return memoryResult{}, nil, err
	}
	log.Printf("RSS: mcs %s, kubernetes %s", mib(res.mcs.rss), mib(res.kube.rss))
	return res, kube, servers.remove(mcs)
}

func sampleMemory(ctx context.Context, o options, mcs, kube *server) (memoryResult, error) {
	var res memoryResult
	for _, s := range []*server{kube, mcs} {
		if err := s.waitReady(ctx); err != nil {
			return res, err
		}
	}
	log.Printf("sampling RSS in %s", o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return res, err
	}
	for range rssSamples {
		if err := res.mcs.sample(mcs); err != nil {
			return res, err
		}
		if err := res.kube.sample(kube); err != nil {
			return res, err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return res, err
		}
	}
	res.mcs.ready, res.kube.ready = mcs.ready, kube.ready
	return res, nil
}

func (m *memoryReading) sample(s *server) error {
	st, err := procStatus(s.Pid())
	if err != nil {
		return fmt.Errorf("%s: %w", s.Name(), err)
	}
	m.rss = max(m.rss, st["VmRSS"])
	m.hwm = st["VmHWM"]
	return nil
}

// procStatus reads the kB fields of /proc/PID/status, in bytes.
func procStatus(pid int) (map[string]int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		num, unit, _ := strings.Cut(strings.TrimSpace(val), " ")
		if !ok || unit != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(num, 10, 64); err == nil {
			out[key] = n << 10
		}
	}
	return out, sc.Err()
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
