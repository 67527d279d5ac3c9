package chaos

import (
	"fmt"
	"slices"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Cluster names of the lab (test/lab/README.md).
const (
	hub     = "hub"
	member1 = "member1"
	member2 = "member2"
	member3 = "member3"
)

var members = []string{member1, member2, member3}

// failoverOrder is the order of the service with a LocalFirst policy.
var failoverOrder = []string{member3, member1}

// Service is one service of the run's world, as the harness sets it up.
type Service struct {
	Name string `json:"name"`
	// MCS: a MultiClusterService on the hub names providers and consumers;
	// otherwise ServiceExports in the providers do, and every member consumes.
	MCS      bool         `json:"mcs"`
	Headless bool         `json:"headless,omitempty"`
	Strategy api.Strategy `json:"strategy,omitempty"`
	// LocalFirstPolicy: spec.localFirst with a minimum of 2 and an order.
	LocalFirstPolicy bool `json:"localFirstPolicy,omitempty"`
	// Providers run the service's Deployment and Service (and, without
	// MCS, export it at the start); Consumers import it.
	Providers []string `json:"providers"`
	Consumers []string `json:"consumers"`
}

// World is the fleet a run acts on.
type World struct {
	Services []Service `json:"services"`
	// APIClusters are the clusters whose API servers faults stop;
	// PodDNS the members whose coredns-mcs runs as pods (deploy/overlays).
	APIClusters []string `json:"apiClusters"`
	PodDNS      []string `json:"podDNS"`
}

// NewWorld is the run's world of n services: the first third exported by
// ServiceExports, the rest by MultiClusterServices of both strategies; one
// of each kind headless, and the last LocalFirst with a minimum and an order.
func NewWorld(n int) World {
	w := World{APIClusters: []string{hub, member1, member2, member3}, PodDNS: []string{member1, member2}}
	patterns := [][]string{{member1, member2}, {member2, member3}, {member1, member2, member3}, {member1, member3}}
	exports := n / 3
	for i := range n {
		s := Service{Name: fmt.Sprintf("s%02d", i), Providers: patterns[i%len(patterns)], Consumers: members}
		switch {
		case i < exports:
			s.Headless = i == exports-1
		default:
			s.MCS = true
			s.Strategy = api.RemoteAndLocal
			if i%2 == 1 {
				s.Strategy = api.LocalFirst
			}
			if i%4 == 1 {
				s.Consumers = []string{member1, member2}
			}
			s.Headless = i == n-2
			if i == n-1 {
				s.Strategy, s.LocalFirstPolicy = api.LocalFirst, true
				s.Providers, s.Consumers = []string{member1, member2, member3}, members
			}
		}
		w.Services = append(w.Services, s)
	}
	return w
}

// Service returns the service named name.
func (w World) Service(name string) (Service, bool) {
	i := slices.IndexFunc(w.Services, func(s Service) bool { return s.Name == name })
	if i < 0 {
		return Service{}, false
	}
	return w.Services[i], true
}
