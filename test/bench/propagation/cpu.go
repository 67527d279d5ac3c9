package main

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Where the machine's CPU went during a phase, by program: the lab's API
// servers, etcds and controllers share the cores with mcs-controller,
// coredns-mcs and this benchmark, so the phase's pace is set by whichever
// takes the cores, and its CPU seconds say so.

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// cpuSample is CPU seconds by process, from /proc.
type cpuSample map[int]procCPU

type procCPU struct {
	comm    string
	seconds float64
}

// programCPU is one program's CPU seconds during a phase.
type programCPU struct {
	program string
	seconds float64
}

func sampleCPU() cpuSample {
	s := cpuSample{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		if p, ok := readProcCPU(path); ok {
			s[pid] = p
		}
	}
	return s
}

// readProcCPU reads a process's name and utime+stime; the name is in
// parentheses and may hold spaces, so the fields are counted after its end.
func readProcCPU(path string) (procCPU, bool) {
	b, err := os.ReadFile(path) // #nosec G304 -- /proc/PID/stat
	if err != nil {
		return procCPU{}, false
	}
	text := string(b)
	open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
	if open < 0 || end < open {
		return procCPU{}, false
	}
	fields := strings.Fields(text[end+1:])
	if len(fields) < 13 { // state … utime(12) stime(13), counted from state as 1
		return procCPU{}, false
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return procCPU{}, false
	}
	return procCPU{comm: text[open+1 : end], seconds: (utime + stime) / clockTicks}, true
}

// since is the CPU each program used between before and s, the most
// first; a process that started meanwhile counts from zero, one that ended
// is not counted.
func (s cpuSample) since(before cpuSample) []programCPU {
	by := map[string]float64{}
	for pid, p := range s {
		was := before[pid]
		if was.comm != p.comm {
			was.seconds = 0
		}
		if d := p.seconds - was.seconds; d > 0 {
			by[p.comm] += d
		}
	}
	var out []programCPU
	for name, sec := range by {
		out = append(out, programCPU{name, sec})
	}
	slices.SortFunc(out, func(a, b programCPU) int {
		return cmp.Or(cmp.Compare(b.seconds, a.seconds), cmp.Compare(a.program, b.program))
	})
	return out
}
