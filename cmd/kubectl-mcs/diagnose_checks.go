package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// The links of the path a name takes, in the order diagnose walks them:
// the first that fails is where to start.
const (
	linkHub     = "hub"     // the MultiClusterService's conditions
	linkMember  = "member"  // reachable, credentials, MCS API, the controller's RBAC
	linkExport  = "export"  // the providers' ServiceExports
	linkImport  = "import"  // each consumer's ServiceImport and its strategy
	linkDerived = "derived" // derived-<svc> and its VIPs
	linkSlices  = "slices"  // imported slices current with their sources
	linkLease   = "lease"   // the providers' Leases in each consumer
	linkCoreDNS = "coredns" // the member's CoreDNS: image, Corefile, RBAC, ready and synced
	linkDNS     = "dns"     // the answer it gets against the answer it should get
	linkConnect = "connect" // what a connection needs: ports carried, no NetworkPolicy in the way
)

// Verdicts of a check.
const (
	verdictOK      = "ok"
	verdictFail    = "fail"
	verdictUnknown = "unknown" // diagnose could not tell (no permission to look, say)
)

// Check is one verdict, as -o json prints it.
type Check struct {
	Link    string `json:"link"`
	Cluster string `json:"cluster,omitempty"`
	Name    string `json:"check"`
	Verdict string `json:"verdict"`
	Problem string `json:"problem,omitempty"`
	Fix     string `json:"fix,omitempty"`
	// Severity is "warning" for a failure diagnose cannot be sure of (a
	// NetworkPolicy whose ipBlocks it cannot judge); "" for the others.
	Severity string `json:"severity,omitempty"`
}

func pass(link, cluster, name string) Check {
	return Check{Link: link, Cluster: cluster, Name: name, Verdict: verdictOK}
}

func fail(link, cluster, name, problem, fix string) Check {
	return Check{Link: link, Cluster: cluster, Name: name, Verdict: verdictFail, Problem: problem, Fix: fix}
}

// warn is a failure diagnose cannot be sure of: it still fails.
func warn(link, cluster, name, problem, fix string) Check {
	c := fail(link, cluster, name, problem, fix)
	c.Severity = severityWarning
	return c
}

const severityWarning = "warning"

func unknown(link, cluster, name, why, fix string) Check {
	return Check{Link: link, Cluster: cluster, Name: name, Verdict: verdictUnknown, Problem: why, Fix: fix}
}

// hubCheck: the MultiClusterService, when there is one, has every
// condition True at its generation; its reasons name the cause.
func hubCheck(w *world) []Check {
	name := "MultiClusterService " + w.namespace + "/" + w.service + " is synced"
	if w.mcsvc == nil {
		return []Check{pass(linkHub, "", "no MultiClusterService: imported by ServiceExports alone, its native name left to the kubernetes plugin")}
	}
	s := fleetService(w.mcsvc)
	if s.Synced {
		return []Check{pass(linkHub, "", name)}
	}
	return []Check{fail(linkHub, "", name, strings.Join(s.NotTrue, "; "), hubFix(w))}
}

// hubFix is the fix for the first condition that is not True, by its reason.
func hubFix(w *world) string {
	reason := ""
	for _, c := range w.mcsvc.Status.Conditions {
		if c.Status != metav1.ConditionTrue {
			reason = c.Reason
			break
		}
	}
	fixes := map[string]string{
		"InvalidSpec":        "correct the spec's field the message names (kubectl --context <hub> -n " + w.namespace + " edit mcsvc " + w.service + ")",
		"NoService":          "create Service " + w.namespace + "/" + w.service + " in a provision cluster (docs/troubleshooting.md, \"Nothing is imported into a member\")",
		"ClusterUnreachable": "docs/troubleshooting.md, \"Condition ClusterUnreachable\": the member's API server, or its credentials",
		"ApplyFailed":        "the message names the cluster and the error; a forbidden one is the controller's RBAC there (kubectl mcs join)",
		"MemberSlow":         "the named member's API server is slow to write (a webhook, etcd): docs/operations.md",
		"ClusterLeft":        "take the deregistered cluster out of the spec, or join it again",
		"Protected":          "the namespace is protected: mcs-controller --allow-export=" + w.namespace + "/" + w.service,
		"CleanupPending":     "the member named must be reachable to be cleaned, or deregistered",
	}
	if f, ok := fixes[reason]; ok {
		return f
	}
	return "is mcs-controller running and leading? kubectl --context <hub> -n mcs-system logs -l app.kubernetes.io/name=mcs-controller --prefix --tail=-1"
}

// reachCheck: diagnose could read the member.
func (o *diagnoseOptions) reachCheck(m *memberState) Check {
	name := "reachable"
	if m.err != nil {
		return fail(linkMember, m.cluster, name, m.err.Error(), "give your kubeconfig a context that reaches the member: named "+m.cluster+", or --member-context "+m.cluster+"=CONTEXT")
	}
	return pass(linkMember, m.cluster, name)
}

// exportChecks: each provider's ServiceExport, when it has one, is Valid
// and not in Conflict; and someone provides the service at all.
func exportChecks(w *world) []Check {
	providers := w.providers()
	if len(providers) == 0 {
		return []Check{fail(linkExport, "", "some member provides "+w.service, "no member exports it and no MultiClusterService provides it",
			"create a ServiceExport "+w.namespace+"/"+w.service+" in the member that runs it, or a MultiClusterService on the hub (docs/troubleshooting.md, \"Nothing is imported into a member\")")}
	}
	var out []Check
	for _, p := range providers {
		if m := w.member(p); m != nil && m.err == nil && m.export != nil {
			out = append(out, exportCheck(w, m))
		}
	}
	return out
}

func exportCheck(w *world, m *memberState) Check {
	name := "ServiceExport " + w.namespace + "/" + w.service + " is Valid, without Conflict"
	conds := m.export.Status.Conditions
	valid := meta.FindStatusCondition(conds, string(mcsv1b1.ServiceExportConditionValid))
	conflict := meta.FindStatusCondition(conds, string(mcsv1b1.ServiceExportConditionConflict))
	switch {
	case valid == nil:
		return fail(linkExport, m.cluster, name, "it has no Valid condition: the controller has not taken it up",
			"is mcs-controller running, does it watch namespace "+w.namespace+" (--watch-namespaces), and is "+m.cluster+" registered? (docs/troubleshooting.md, \"Nothing is imported into a member\")")
	case valid.Status != metav1.ConditionTrue:
		return fail(linkExport, m.cluster, name, fmt.Sprintf("Valid=%s (%s): %s", valid.Status, valid.Reason, valid.Message),
			"docs/troubleshooting.md, \"Nothing is imported into a member\", reason "+valid.Reason)
	case conflict != nil && conflict.Status == metav1.ConditionTrue:
		return fail(linkExport, m.cluster, name, fmt.Sprintf("Conflict=True (%s): %s", conflict.Reason, conflict.Message),
			"make the providers' Services agree on their ports and type (docs/troubleshooting.md, \"Condition Conflict\")")
	}
	return pass(linkExport, m.cluster, name)
}

// importCheck: a consumer holds the ServiceImport, with the strategy
// annotation the MultiClusterService asks for (none without one).
func importCheck(w *world, m *memberState) Check {
	want := w.strategy()
	name := "ServiceImport " + w.namespace + "/" + w.service + " with strategy " + orNone(want)
	if m.imp == nil {
		return fail(linkImport, m.cluster, name, "there is no ServiceImport: nothing is imported here",
			"the MultiClusterService's EndpointSliceApplied and the exports' Ready say why (docs/troubleshooting.md, \"Nothing is imported into a member\")")
	}
	got := m.imp.Annotations[api.AnnotationStrategy]
	switch {
	case got == want:
		return pass(linkImport, m.cluster, name)
	case want == "":
		return fail(linkImport, m.cluster, name, "it carries strategy "+got+" with no MultiClusterService on the hub",
			"mcs-controller removes it at its next sync of the service; if it stays, is the controller running?")
	}
	return fail(linkImport, m.cluster, name, "its strategy annotation is "+orNone(got),
		"mcs-controller writes it from the MultiClusterService: is the controller running, and "+m.cluster+" among its serviceConsumptionClusters? (docs/troubleshooting.md, \"Answers are still local-only\")")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// derivedCheck: derived-<svc> exists and its ClusterIPs are the import's
// IPs (none for a headless import).
func derivedCheck(w *world, m *memberState) Check {
	name := "Service " + w.namespace + "/" + api.DerivedPrefix + w.service + " holds the import's VIPs"
	fix := "mcs-controller writes it back at its next sync of the service: is the controller running and " + m.cluster + " reachable from it?"
	switch {
	case m.derived == nil:
		return fail(linkDerived, m.cluster, name, "there is no "+api.DerivedPrefix+w.service, fix)
	case m.imp.Spec.Type == mcsv1b1.Headless:
		return pass(linkDerived, m.cluster, name)
	case !slices.Equal(m.derived.Spec.ClusterIPs, m.imp.Spec.IPs):
		return fail(linkDerived, m.cluster, name, fmt.Sprintf("its ClusterIPs %v are not the import's spec.ips %v", m.derived.Spec.ClusterIPs, m.imp.Spec.IPs), fix)
	}
	return pass(linkDerived, m.cluster, name)
}

// sliceChecks: every source slice of every reachable provider is imported
// here, current with its generation, and no imported slice is left over.
func sliceChecks(w *world, m *memberState) []Check {
	name := "imported EndpointSlices are current with their sources"
	want := map[string]string{} // imported name → its source's generation
	source := map[string]string{}
	for _, p := range w.providers() {
		pm := w.member(p)
		if pm == nil || pm.err != nil {
			continue // its reachability check says so; its slices cannot be compared
		}
		for _, s := range pm.own {
			n := desired.ImportedName(p, s.Name)
			want[n], source[n] = strconv.FormatInt(s.Generation, 10), p+"/"+s.Name
		}
	}
	var problems []string
	have := map[string]bool{}
	for _, s := range m.imported {
		have[s.Name] = true
		gen, ok := want[s.Name]
		// A slice's source is known gone only when its cluster was read.
		src := w.member(s.Labels[mcsv1b1.LabelSourceCluster])
		switch {
		case !ok && src != nil && src.err == nil:
			problems = append(problems, s.Name+" has no source slice left")
		case ok && s.Annotations[api.AnnotationSourceGeneration] != gen:
			problems = append(problems, fmt.Sprintf("%s is of generation %s of %s, which is at %s", s.Name, orNone(s.Annotations[api.AnnotationSourceGeneration]), source[s.Name], gen))
		}
	}
	for n := range want {
		if !have[n] {
			problems = append(problems, n+" (of "+source[n]+") is missing")
		}
	}
	if len(problems) == 0 {
		return []Check{pass(linkSlices, m.cluster, fmt.Sprintf("%s (%d)", name, len(m.imported)))}
	}
	slices.Sort(problems)
	return []Check{fail(linkSlices, m.cluster, name, strings.Join(problems, "; "),
		"mcs-controller writes them at its next sync of the service: is it running, and are the providers reachable from it (mcs_member_reachable)? docs/troubleshooting.md, \"Stale endpoints after a cluster went away\"")}
}

// leaseChecks: each provider's Lease here is renewed within its duration.
func leaseChecks(w *world, m *memberState, now time.Time) []Check {
	var out []Check
	for _, c := range m.imp.Status.Clusters {
		p := c.Cluster
		name := "Lease " + api.LeaseNamespace + "/" + api.LeasePrefix + p + " is fresh"
		fix := "mcs-controller renews it while it reaches " + p + ": is it running, and mcs_member_reachable{cluster=\"" + p + "\"} 1? Its log line \"Cannot renew Lease\" with cluster=\"" + m.cluster + "\" says why it cannot write it (docs/troubleshooting.md, \"Stale endpoints after a cluster went away\")"
		l := m.leases[p]
		switch {
		case l == nil:
			out = append(out, fail(linkLease, m.cluster, name, "there is none: the controller has not renewed it here (and coredns-mcs never calls "+p+" stale, even when it is gone)", fix))
		case l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil:
			out = append(out, fail(linkLease, m.cluster, name, "it has no renewTime or duration", fix))
		default:
			age := now.Sub(l.Spec.RenewTime.Time).Round(time.Second)
			if age > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
				out = append(out, fail(linkLease, m.cluster, name, fmt.Sprintf("renewed %s ago, past its %d s: coredns-mcs calls %s stale", age, *l.Spec.LeaseDurationSeconds, p), fix))
			} else {
				out = append(out, pass(linkLease, m.cluster, name))
			}
		}
	}
	return out
}
