package mcs

import (
	"github.com/coredns/coredns/plugin"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Metrics go to the default registry, which the prometheus plugin exports
// (the way the kubernetes and template plugins register theirs).
var (
	requestsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "requests_total",
		Help:      "Queries answered by mcs, by zone, strategy and the set the answer came from.",
	}, []string{"zone", "strategy", "outcome"})

	localFallbacks = promauto.NewCounter(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "local_fallbacks_total",
		Help:      "LocalFirst answers that fell back to remote endpoints because no local endpoint was ready.",
	})

	informersSynced = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "informers_synced",
		Help:      "1 when the informer of that resource has synced with the API server, else 0.",
	}, []string{"resource"})

	staleClusters = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: pluginName,
		Name:      "stale_clusters",
		Help:      "Source clusters whose Lease source-<cluster> has expired.",
	})
)

// outcome labels the requests metric: which set an answer came from.
type outcome string

const (
	outcomeLocal    outcome = "local"
	outcomeRemote   outcome = "remote"
	outcomeCombined outcome = "combined"
	outcomeNXDomain outcome = "nxdomain"
	outcomeServfail outcome = "servfail"
)

// strategyNone labels answers that no strategy applies to (clusterset names,
// SERVFAIL before sync).
const strategyNone = "none"

func count(zone string, s api.Strategy, o outcome) {
	label := string(s)
	if label == "" {
		label = strategyNone
	}
	requestsTotal.WithLabelValues(zone, label, string(o)).Inc()
}
