package desired

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// candidate is one provision cluster's Service, aged for the KEP's rule,
// the oldest export wins: by when the hub first saw it provide, and only
// among those first seen together by what its member reports, the
// creation of its export (else of the Service itself).
type candidate struct {
	cluster string
	seen    time.Time
	since   metav1.Time
	svc     *corev1.Service
	export  *mcsv1b1.ServiceExport // nil: provided by a MultiClusterService
}

// shape merges the provision clusters' Services into the ServiceImport's
// shape (KEP-1645): the oldest decides the type, ports are the union, and
// where the Services define a port otherwise the older one wins. Losers,
// and exports that lack a port of the union, are recorded in p.Conflicts.
func (p *Plan) shape(in *Input) *Import {
	cands := candidates(in, p.Provision)
	if len(cands) == 0 {
		return nil
	}
	imp := &Import{Headless: IsHeadless(cands[0].svc)}
	for _, c := range cands {
		imp.Clusters = append(imp.Clusters, c.cluster)
		if IsHeadless(c.svc) != imp.Headless {
			p.conflict(c.cluster, mcsv1b1.ServiceExportReasonTypeConflict,
				fmt.Sprintf("%s's Service is %s, but the oldest export (%s) is %s", c.cluster, kind(c.svc), cands[0].cluster, kind(cands[0].svc)))
		}
		for _, sp := range c.svc.Spec.Ports {
			var why string
			imp.Ports, why = addPort(imp.Ports, importPort(sp), in.MaxPorts)
			if why != "" {
				p.conflict(c.cluster, mcsv1b1.ServiceExportReasonPortConflict, c.cluster+"'s "+why)
			}
		}
	}
	p.asymmetric(cands, imp.Ports)
	slices.Sort(imp.Clusters)
	if imp.Headless {
		imp.HeadlessFamilies = allFamilies(cands)
	} else {
		imp.IPFamilyPolicy, imp.IPFamilies = p.families(cands)
		imp.Traffic = p.traffic(cands)
	}
	imp.Labels, imp.Annotations = p.exported(cands)
	return imp
}

// ConflictOf is the Conflict condition of cluster's export, if any. As
// KEP-1645 asks, when the exports disagree every one of them says so: a
// newer one whose definition lost, with its own reason and message, and
// every other one (the oldest, whose definition is used, included) with
// the reason of the first that lost and what each lost on.
func (p *Plan) ConflictOf(cluster string) (Cause, bool) {
	if c, lost := p.Conflicts[cluster]; lost {
		return c, true
	}
	if len(p.Conflicts) == 0 || p.Import == nil || !slices.Contains(p.Import.Clusters, cluster) {
		return Cause{}, false
	}
	losers := slices.Sorted(maps.Keys(p.Conflicts))
	var msgs []string
	for _, l := range losers {
		msgs = append(msgs, p.Conflicts[l].Message)
	}
	return Cause{p.Conflicts[losers[0]].Reason, "the exports of this service conflict: " + strings.Join(msgs, "; ")}, true
}

// asymmetric records a conflict for each export whose Service lacks a
// port of the union: its clients reach, through the clusterset IP, ports
// its pods may not serve. The union is still what is imported, as
// KEP-1645 asks.
func (p *Plan) asymmetric(cands []candidate, union []mcsv1b1.ServicePort) {
	for _, c := range cands {
		var lacks []string
		for _, u := range union {
			if !slices.ContainsFunc(c.svc.Spec.Ports, func(sp corev1.ServicePort) bool {
				return sp.Port == u.Port && cmp.Or(sp.Protocol, corev1.ProtocolTCP) == u.Protocol
			}) {
				lacks = append(lacks, fmt.Sprintf("%d/%s", u.Port, u.Protocol))
			}
		}
		if len(lacks) > 0 {
			p.conflict(c.cluster, mcsv1b1.ServiceExportReasonPortConflict,
				fmt.Sprintf("%s's Service lacks the port(s) %s that other exports have: the union of their ports is imported", c.cluster, strings.Join(lacks, ", ")))
		}
	}
}

// conflict records the first conflict of a cluster.
func (p *Plan) conflict(cluster string, reason mcsv1b1.ServiceExportConditionReason, msg string) {
	if _, has := p.Conflicts[cluster]; !has {
		p.Conflicts[cluster] = Cause{reason, msg}
	}
}

// addPort adds a newer export's port to the older exports' ports, or says
// why it cannot: a port is its number and protocol, and the derived
// Service must be one the API server accepts (each port once, each name
// once, every port named when there are several).
func addPort(ports []mcsv1b1.ServicePort, sp mcsv1b1.ServicePort, maxPorts int) ([]mcsv1b1.ServicePort, string) {
	i := slices.IndexFunc(ports, func(p mcsv1b1.ServicePort) bool { return p.Port == sp.Port && p.Protocol == sp.Protocol })
	if i < 0 && maxPorts > 0 && len(ports) >= maxPorts {
		return ports, fmt.Sprintf("port %d/%s would make the import's ports more than %d (mcs-controller --max-imported-ports): it is not imported", sp.Port, sp.Protocol, maxPorts)
	}
	if i >= 0 {
		if have := ports[i]; have.Name != sp.Name || !equality.Semantic.DeepEqual(have.AppProtocol, sp.AppProtocol) {
			return ports, fmt.Sprintf("port %d/%s is %s, but an older export has it %s: the older one is used", sp.Port, sp.Protocol, describe(sp), describe(have))
		}
		return ports, ""
	}
	if i := slices.IndexFunc(ports, func(p mcsv1b1.ServicePort) bool { return p.Name == sp.Name }); i >= 0 {
		return ports, fmt.Sprintf("%s port is %d/%s, but an older export's is %d/%s", describe(sp), sp.Port, sp.Protocol, ports[i].Port, ports[i].Protocol)
	}
	if len(ports) > 0 && (sp.Name == "" || ports[0].Name == "") {
		return ports, fmt.Sprintf("port %d/%s cannot join the older exports' %d/%s: a Service with several ports must name each", sp.Port, sp.Protocol, ports[0].Port, ports[0].Protocol)
	}
	return append(ports, sp), ""
}

func describe(sp mcsv1b1.ServicePort) string {
	out := "unnamed"
	if sp.Name != "" {
		out = fmt.Sprintf("named %q", sp.Name)
	}
	if sp.AppProtocol != nil {
		out += fmt.Sprintf(" with appProtocol %q", *sp.AppProtocol)
	}
	return out
}

func candidates(in *Input, provision []string) []candidate {
	var out []candidate
	for _, name := range provision {
		m := in.Members[name]
		if !m.Known || m.Service == nil || m.Service.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		since := m.Service.CreationTimestamp
		if m.Export != nil {
			since = m.Export.CreationTimestamp
		}
		out = append(out, candidate{cluster: name, seen: m.FirstSeen, since: since, svc: m.Service, export: m.Export})
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(compareSeen(a.seen, b.seen), a.since.Compare(b.since.Time), cmp.Compare(a.cluster, b.cluster))
	})
	return out
}

// compareSeen orders first-seen times, the zero time (not seen yet) last.
func compareSeen(a, b time.Time) int {
	switch {
	case a.IsZero() == b.IsZero():
		return a.Compare(b)
	case a.IsZero():
		return 1
	}
	return -1
}

func importPort(sp corev1.ServicePort) mcsv1b1.ServicePort {
	return mcsv1b1.ServicePort{Name: sp.Name, Protocol: cmp.Or(sp.Protocol, corev1.ProtocolTCP), AppProtocol: sp.AppProtocol, Port: sp.Port}
}

// IsHeadless reports whether s has no ClusterIP: its name answers its endpoints.
func IsHeadless(s *corev1.Service) bool { return s.Spec.ClusterIP == corev1.ClusterIPNone }

func kind(s *corev1.Service) string {
	if IsHeadless(s) {
		return "headless"
	}
	return "a ClusterIP Service"
}
