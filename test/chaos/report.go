package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Report is what a run writes into its directory: report.json, report.md,
// and the history (schedule.txt, applied.jsonl, probes.jsonl,
// samples.jsonl) to replay and read it.
type Report struct {
	Config   Config        `json:"config"`
	Limits   Limits        `json:"limits"`
	World    World         `json:"world"`
	Started  time.Time     `json:"started"`
	Ran      time.Duration `json:"ran"`
	Result   Result        `json:"result"`
	Missing  []string      `json:"missing"`
	Schedule []Event       `json:"-"`
}

// Write writes the report and the history into dir.
func (r Report) Write(dir string, applied []Applied, probes []Probe, samples []Sample) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := writeSchedule(dir, r.Schedule); err != nil {
		return err
	}
	files := map[string][]byte{"report.json": b, "report.md": []byte(r.Markdown())}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	if err := writeLines(filepath.Join(dir, "applied.jsonl"), applied); err != nil {
		return err
	}
	if err := writeLines(filepath.Join(dir, "probes.jsonl"), probes); err != nil {
		return err
	}
	return writeLines(filepath.Join(dir, "samples.jsonl"), samples)
}

// writeSchedule writes the schedule, an event a line, into dir: a run
// writes it before it starts, so that one that dies still leaves it.
func writeSchedule(dir string, schedule []Event) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	for _, e := range schedule {
		fmt.Fprintln(&b, e)
	}
	return os.WriteFile(filepath.Join(dir, "schedule.txt"), []byte(b.String()), 0o644)
}

func writeLines[T any](path string, items []T) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// Markdown is the report for people: the run, each invariant's numbers,
// the violations with the seed that replays them.
func (r Report) Markdown() string {
	var b strings.Builder
	res := r.Result
	fmt.Fprintf(&b, "# Chaos run, seed %d\n\n", r.Config.Seed)
	fmt.Fprintf(&b, "Started %s, ran %s (schedule %s, the last %s quiet), %d services, workload %.1f changes/s, a fault every %s on average; faults: %s.\n\n",
		r.Started.UTC().Format(time.RFC3339), r.Ran.Round(time.Second), r.Config.Duration, r.Config.Quiet, len(r.World.Services),
		r.Config.Rate, r.Config.FaultGap, strings.Join(r.Config.Faults, ", "))
	shards := ""
	if r.Config.Shards > 1 {
		shards = fmt.Sprintf("SHARDS=%d ", r.Config.Shards)
		fmt.Fprintf(&b, "Controller: %d replicas with `--shards %d`; kill-leader kills a shard's holder.\n\n", replicasFor(r.Config.Shards), r.Config.Shards)
	}
	fmt.Fprintf(&b, "Replay: `%sSEED=%d DURATION=%s FAULTS=%s make chaos`\n\n", shards, r.Config.Seed, r.Config.Duration, strings.Join(r.Config.Faults, ","))
	b.WriteString(workloadLine(res))
	fmt.Fprintf(&b, "Windows: settle %s, grace after a fault heals %s, converge %s.\n\n", r.Limits.Settle, r.Limits.Grace, r.Limits.Converge)
	b.WriteString("| fault | injected | could not be injected | excused misses | every API server read again after heal p50 / max (s) | converged after heal, no other fault under way: n, p50 / p99 / max (s) | not converged | overlapped by another fault |\n|---|---|---|---|---|---|---|---|\n")
	for _, k := range FaultKinds {
		st := res.Convergence[k]
		conv := "0"
		if st.N > 0 {
			conv = fmt.Sprintf("%d, %.1f / %.1f / %.1f", st.N, st.P50, st.P99, st.Max)
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f / %.1f | %s | %d | %d |\n", k, res.FaultsApplied[k], res.FaultsFailed[k], res.Excused[k],
			st.BackP50, st.BackMax, conv, st.NotConverged, st.Overlapped)
	}
	count := map[string]int{}
	for _, v := range res.Violations {
		count[v.Invariant]++
	}
	b.WriteString("\n| invariant | number | violations |\n|---|---|---|\n")
	fmt.Fprintf(&b, "| available | %d probes, %d the model said must answer, %d misses (%d in a fault's window) | %d |\n",
		res.Probes, res.Checked, res.Misses, res.Misses-count["available"], count["available"])
	fmt.Fprintf(&b, "| converged | see the table above | %d |\n", count["converged"])
	fmt.Fprintf(&b, "| alive | %d injected exits, %d on a lead lost while the hub was faulted (by design), %d else, %d panics | %d |\n",
		res.Injected, res.LostLead, res.NotInjected, len(res.Panics), count["alive"])
	if n := count["harness"]; n > 0 {
		fmt.Fprintf(&b, "| harness | the run itself broke: a cluster left down, or a member not joined again | %d |\n", n)
	}
	fmt.Fprintf(&b, "| lean | %d writes other than Leases in the quiet last %s; memory below | %d |\n", res.QuietWrites, res.QuietWindow, count["lean"])
	b.WriteString(res.ownedRow(count["owned"]))
	b.WriteString("\n" + memoryTable(res.Memory))
	if len(res.Violations) > 0 {
		b.WriteString("\n## Violations\n\n| at | invariant | service | consumer | what | last fault before |\n|---|---|---|---|---|---|\n")
		for i, v := range res.Violations {
			if i == 100 {
				fmt.Fprintf(&b, "\n%d more in report.json\n", len(res.Violations)-100)
				break
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", v.At.Round(time.Millisecond), v.Invariant, v.Service, v.Consumer,
				strings.ReplaceAll(v.Detail, "|", "/"), v.LastFault)
		}
	}
	if len(res.ExcusedMisses) > 0 {
		b.WriteString("\n## Misses within a fault's window\n\nExcused, but worth reading: a miss a fault does not explain is a finding.\n\n")
		b.WriteString("| at | service | consumer | what | last fault before |\n|---|---|---|---|---|\n")
		for _, v := range res.ExcusedMisses {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", v.At.Round(time.Millisecond), v.Service, v.Consumer, strings.ReplaceAll(v.Detail, "|", "/"), v.LastFault)
		}
	}
	if len(r.Missing) > 0 {
		b.WriteString("\n## Not covered yet\n\n")
		for _, m := range r.Missing {
			fmt.Fprintf(&b, "- %s\n", m)
		}
	}
	return b.String()
}

// workloadLine is the workload changes carried out by kind, and those that
// could not be.
func workloadLine(res Result) string {
	var done, failed []string
	n := 0
	for _, k := range WorkloadKinds {
		n += res.Workload[k]
		done = append(done, fmt.Sprintf("%d %s", res.Workload[k], k))
		if f := res.WorkloadFailed[k]; f > 0 {
			failed = append(failed, fmt.Sprintf("%d %s", f, k))
		}
	}
	s := fmt.Sprintf("Workload: %d changes (%s)", n, strings.Join(done, ", "))
	if len(failed) > 0 {
		s += "; could not be carried out: " + strings.Join(failed, ", ")
	}
	return s + ".\n\n"
}

// HistoryAround is what the run did from before until after around at: the
// events as applied, an event a line, to read with a violation.
func HistoryAround(applied []Applied, at, before, after time.Duration) string {
	var b strings.Builder
	for _, a := range applied {
		if a.Start < at-before || a.Start > at+after {
			continue
		}
		fmt.Fprintf(&b, "%s (began %s", a.Event, a.Start.Round(time.Millisecond))
		if a.IsFault() {
			fmt.Fprintf(&b, ", healed %s", a.Heal.Round(time.Millisecond))
		}
		if a.Err != "" {
			fmt.Fprintf(&b, ", failed: %s", a.Err)
		}
		b.WriteString(")\n")
	}
	return b.String()
}
