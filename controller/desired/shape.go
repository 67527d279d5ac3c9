package desired

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// candidate is one provision cluster's Service, aged by its export (else
// by the Service itself) for the KEP's rule: the oldest export wins.
type candidate struct {
	cluster string
	since   metav1.Time
	svc     *corev1.Service
}

// shape merges the provision clusters' Services into the ServiceImport's
// shape (KEP-1645): the oldest decides the type, ports are the union, and a
// port of the same name that differs in number or protocol loses to the
// older one. Losers are recorded in p.Conflicts.
func (p *Plan) shape(in *Input) *Import {
	cands := candidates(in, p.Provision)
	if len(cands) == 0 {
		return nil
	}
	imp := &Import{Headless: IsHeadless(cands[0].svc)}
	byName := map[string]mcsv1b1.ServicePort{}
	for _, c := range cands {
		imp.Clusters = append(imp.Clusters, c.cluster)
		if IsHeadless(c.svc) != imp.Headless {
			p.Conflicts[c.cluster] = Conflict{mcsv1b1.ServiceExportReasonTypeConflict,
				fmt.Sprintf("%s's Service is %s, but the oldest export (%s) is %s", c.cluster, kind(c.svc), cands[0].cluster, kind(cands[0].svc))}
		}
		for _, sp := range c.svc.Spec.Ports {
			port := importPort(sp)
			prev, seen := byName[port.Name]
			switch {
			case !seen:
				byName[port.Name] = port
				imp.Ports = append(imp.Ports, port)
			case prev.Port != port.Port || prev.Protocol != port.Protocol:
				if _, has := p.Conflicts[c.cluster]; !has {
					p.Conflicts[c.cluster] = Conflict{mcsv1b1.ServiceExportReasonPortConflict,
						fmt.Sprintf("%s's port %q is %d/%s, but an older export has %d/%s", c.cluster, port.Name, port.Port, port.Protocol, prev.Port, prev.Protocol)}
				}
			}
		}
	}
	slices.Sort(imp.Clusters)
	return imp
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
		out = append(out, candidate{cluster: name, since: since, svc: m.Service})
	}
	slices.SortFunc(out, func(a, b candidate) int {
		return cmp.Or(a.since.Compare(b.since.Time), cmp.Compare(a.cluster, b.cluster))
	})
	return out
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
