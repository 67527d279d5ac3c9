package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	syncSvcDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcs_sync_svc_duration_seconds",
		Help:    "Time one sync of a service took, from reading the caches to the last write, by result.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"result"})

	syncEpsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "mcs_sync_eps_duration_seconds",
		Help:    "Time the imported EndpointSlices of one service took to write into one consumption cluster.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"cluster"})

	propagation = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "mcs_propagation_seconds",
		Help:    "From a source EndpointSlice change seen by the controller to its imported copy acknowledged by a consumption cluster.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})

	writePanics = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mcs_write_panics_total",
		Help: "Writes into a member that a panic stopped: a defect of the controller's, logged with its stack; the service is synced again.",
	})

	changesPaced = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mcs_member_changes_paced_total",
		Help: "Changes of the member cluster (source EndpointSlices, Services, ServiceExports, ServiceImports) whose services waited for its budget (--member-change-rate).",
	}, []string{"cluster"})
)

func init() {
	legacyregistry.RawMustRegister(syncSvcDuration, syncEpsDuration, propagation, changesPaced, writePanics)
}
