// Command recheck checks a recorded chaos run again, with the invariants
// of this tree, and prints its report: after the checker changed, or to
// read a run with other windows. The alive and lean invariants need the
// processes' exits, logs, metrics and memory, which only the run has: it
// reuses the recorded numbers. The owned invariant is checked again from
// the audit logs the run copied.
//
//	go run ./test/chaos/recheck _output/chaos/<seed>-<time>
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/coredns-mcs/coredns-mcs/test/chaos"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: recheck DIR (a run's directory under _output/chaos)")
		os.Exit(2)
	}
	if err := recheck(os.Args[1]); err != nil {
		fmt.Fprintf(os.Stderr, "recheck: %v\n", err)
		os.Exit(1)
	}
}

func recheck(dir string) error {
	var rep chaos.Report
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "report.json"), err)
	}
	samples, err := readLines[chaos.Sample](filepath.Join(dir, "samples.jsonl"))
	if err != nil {
		return err
	}
	probes, err := readLines[chaos.Probe](filepath.Join(dir, "probes.jsonl"))
	if err != nil {
		return err
	}
	applied, err := readLines[chaos.Applied](filepath.Join(dir, "applied.jsonl"))
	if err != nil {
		return err
	}
	alive := rep.Result
	rep.Result = chaos.Check(rep.World, rep.Limits, samples, probes, applied, nil, alive.Panics)
	rep.Result.Injected, rep.Result.LostLead, rep.Result.NotInjected = alive.Injected, alive.LostLead, alive.NotInjected
	rep.Result.QuietWrites, rep.Result.QuietWindow = alive.QuietWrites, alive.QuietWindow
	rep.Result.Memory = alive.Memory
	for _, v := range alive.Violations {
		if v.Invariant == "alive" || v.Invariant == "lean" {
			rep.Result.Violations = append(rep.Result.Violations, v)
		}
	}
	if o := alive.Ownership; o != nil {
		// The run copied the API servers' audit logs beside its report.
		logs, err := chaos.ReadAudit(filepath.Join(dir, "audit"))
		if err != nil {
			return err
		}
		rep.Result.Owned(logs, rep.World.APIClusters, o.From, rep.Started, o.To)
	}
	fmt.Print(rep.Markdown())
	return nil
}

func readLines[T any](path string) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<28)
	for line := 1; sc.Scan(); line++ {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		out = append(out, v)
	}
	return out, sc.Err()
}
