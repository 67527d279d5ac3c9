package chaos

import (
	"fmt"
	"slices"
	"time"
)

// Sample is one reading of every cluster by the harness, the model's input:
// what the source clusters hold (their own EndpointSlices, ServiceExports,
// the hub's MultiClusterServices) and what the consumers were given
// (ServiceImports, imported slices). A cluster that did not answer keeps
// what the previous Sample read of it, and Up says so.
type Sample struct {
	At time.Duration   `json:"at"`
	Up map[string]bool `json:"up"`
	// Ready and All: service -> provider -> addresses of the provider's own
	// EndpointSlices (ready ones; all of them).
	Ready map[string]map[string][]string `json:"ready"`
	All   map[string]map[string][]string `json:"all"`
	// Exports: service -> members holding its ServiceExport; MCS: services
	// with a MultiClusterService on the hub.
	Exports map[string][]string `json:"exports"`
	MCS     map[string]bool     `json:"mcs"`
	// Provision and Consumption: service -> its MultiClusterService's
	// serviceProvisionClusters and serviceConsumptionClusters, as the hub
	// has them (empty: none listed), for each MultiClusterService read.
	Provision   map[string][]string `json:"provision"`
	Consumption map[string][]string `json:"consumption"`
	// Imports: consumer -> services with a ServiceImport there; Imported:
	// consumer -> service -> source cluster -> addresses of the imported
	// slices.
	Imports  map[string][]string                       `json:"imports"`
	Imported map[string]map[string]map[string][]string `json:"imported"`
	// Away: members the hub registers no more (no Secret of theirs), which
	// provide and consume nothing (membership.go).
	Away []string `json:"away,omitempty"`
}

// Providers are the joined clusters the model says provide s: for a
// MultiClusterService its provision clusters as the hub lists them, or with
// none listed every member that has the Service (those the harness made it
// in: it deletes none); for ServiceExports the members holding one. None
// while s is not exported.
func (m Sample) Providers(s Service) []string {
	candidates := s.Providers
	if s.MCS {
		if !m.MCS[s.Name] {
			return nil
		}
		if list := m.Provision[s.Name]; len(list) > 0 {
			candidates = list
		}
	}
	var out []string
	for _, c := range candidates {
		if m.joined(c) && (s.MCS || slices.Contains(m.Exports[s.Name], c)) {
			out = append(out, c)
		}
	}
	return out
}

// Consumes reports whether the model says c imports s: s has a provider,
// and c is a joined member and a consumption cluster of its
// MultiClusterService as the hub lists them (none listed: every member),
// or, exported by ServiceExports, a member.
func (m Sample) Consumes(s Service, c string) bool {
	return len(m.Providers(s)) > 0 && m.joined(c) && slices.Contains(m.consumers(s), c)
}

func (m Sample) consumers(s Service) []string {
	list, read := m.Consumption[s.Name]
	switch {
	case !s.MCS || !read:
		// Read is false in a recording from before the harness read the
		// lists, which never changed then: the world's.
		return s.Consumers
	case len(list) == 0:
		return members
	}
	return list
}

// Serving reports whether a provider of s has a ready endpoint: then every
// consumer's names of s must answer.
func (m Sample) Serving(s Service) bool {
	for _, p := range m.Providers(s) {
		if len(m.Ready[s.Name][p]) > 0 {
			return true
		}
	}
	return false
}

// Known reports whether this sample read c and every cluster s may come
// from: what the harness holds of a cluster it could not read is as old as
// its last reading, and so is the controller's view, at another time.
func (m Sample) Known(s Service, c string) bool {
	if !m.Up[c] || (s.MCS && !m.Up[hub]) {
		return false
	}
	for _, p := range s.Providers {
		if !m.Up[p] {
			return false
		}
	}
	return true
}

// Mismatch says how consumer c's import of s differs from the model, or
// "" when it matches: a ServiceImport exactly where the model has a
// consumer, and from each provider a copy of every address of its own
// slices (ready or not: a stale provider's copies are kept, not ready), and
// nothing from a cluster that does not provide.
func (m Sample) Mismatch(s Service, c string) string {
	want := m.Consumes(s, c)
	has := slices.Contains(m.Imports[c], s.Name)
	if want != has {
		return fmt.Sprintf("ServiceImport present %t, model %t", has, want)
	}
	provs := m.Providers(s)
	got := m.Imported[c][s.Name]
	if !want {
		if len(got) > 0 {
			return fmt.Sprintf("imported slices from %v without an import", keys(got))
		}
		return ""
	}
	for src, addrs := range got {
		if !slices.Contains(provs, src) && len(addrs) > 0 {
			return fmt.Sprintf("imported %v from %s, which does not provide", addrs, src)
		}
	}
	for _, p := range provs {
		if a, b := sorted(got[p]), sorted(m.All[s.Name][p]); !slices.Equal(a, b) {
			return fmt.Sprintf("from %s imported %v, source has %v", p, a, b)
		}
	}
	return ""
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
