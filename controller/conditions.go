package controller

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
)

// The MultiClusterServices' conditions are exported as the hub holds
// them, so that an alert fires for one that stays not Ready: the Warning
// Events say so once, and a metric of the controller's own errors says
// nothing of a spec that names an unknown cluster. They are read from the
// informers' cache at each scrape, not recorded as they are written, so
// that every replica reports the same, with shards or after a hand-over,
// and a deleted MultiClusterService leaves no series behind.

var conditionDesc = prometheus.NewDesc("mcs_multiclusterservice_condition",
	"1 for each condition of each MultiClusterService on the hub, by its type, status and reason, as the hub holds them; absent until the controller has listed them.",
	// Not namespace and name: a scrape gives every series the namespace
	// and pod of the controller's own target.
	[]string{"mcsvc_namespace", "mcsvc_name", "type", "status", "reason"}, nil)

// conditionCollector exports the conditions of the running controller's
// hub, if any.
type conditionCollector struct{ hub atomic.Pointer[hubMCS] }

var hubConditions = &conditionCollector{}

func init() { legacyregistry.RawMustRegister(hubConditions) }

func (*conditionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- conditionDesc }

func (cc *conditionCollector) Collect(ch chan<- prometheus.Metric) {
	h := cc.hub.Load()
	if h == nil || !h.synced() {
		return
	}
	for _, k := range h.keys() {
		namespace, name, _ := cache.SplitMetaNamespaceKey(k)
		m := h.get(namespace, name)
		if m == nil {
			continue // deleted since it was listed
		}
		for _, c := range m.Status.Conditions {
			ch <- prometheus.MustNewConstMetric(conditionDesc, prometheus.GaugeValue, 1, namespace, name, c.Type, string(c.Status), c.Reason)
		}
	}
}
