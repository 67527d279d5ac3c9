package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// writesMetric is mcs-controller's count of its API writes, by cluster,
// kind, verb and result.
const writesMetric = "mcs_writes_total"

// Writes are a replica's writes other than Leases' by kind: Leases are
// renewed on a clock whatever changes, everything else only when the world
// does.
func Writes(families map[string]*dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range families[writesMetric].GetMetric() {
		kind := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "kind" {
				kind = l.GetValue()
			}
		}
		if kind != "Lease" {
			out[kind] += m.GetCounter().GetValue()
		}
	}
	return out
}

// Lean is the lean invariant's writes half: once the fleet is quiet and
// converged, the controller writes nothing but Leases. Before and after are
// each replica's Writes (by its address) at the start and the end of a
// quiet window ending at end; a replica missing from either is not counted.
func (r *Result) Lean(before, after map[string]map[string]float64, window, end time.Duration) {
	r.QuietWindow = window
	byKind := map[string]float64{}
	read := 0
	for addr, a := range after {
		b, ok := before[addr]
		if !ok {
			continue
		}
		read++
		for kind, n := range a {
			if d := n - b[kind]; d > 0 {
				byKind[kind] += d
				r.QuietWrites += int(d)
			}
		}
	}
	if read == 0 {
		r.Violations = append(r.Violations, Violation{Invariant: "lean", At: end,
			Detail: "no controller replica's metrics were read at both ends of the quiet window"})
		return
	}
	if r.QuietWrites == 0 {
		return
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, byKind[k]))
	}
	r.Violations = append(r.Violations, Violation{Invariant: "lean", At: end,
		Detail: fmt.Sprintf("%d writes other than Leases in the quiet, converged last %s: %s", r.QuietWrites, window, strings.Join(parts, ", "))})
}
