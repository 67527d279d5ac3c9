package mcs

import (
	"fmt"

	"github.com/coredns/coredns/coremain"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
)

// clients are the API clients the watcher reads through; tests put fakes here.
type clients struct {
	kube kubernetes.Interface
	mcs  mcsclient.Interface
	dyn  dynamic.Interface
	host string // API server address, for log messages
	// health sees every response of the API server; nil with fake clients.
	health *apiHealth
}

func newClients(rc *rest.Config) (clients, error) {
	rc = rest.CopyConfig(rc)
	rc.UserAgent = fmt.Sprintf("coredns-mcs/%s", coremain.CoreVersion)
	health := newAPIHealth()
	rc.Wrap(health.wrap)
	// Custom resources only speak JSON; built-in types are cheaper as protobuf.
	kubeRC := rest.CopyConfig(rc)
	kubeRC.ContentType = "application/vnd.kubernetes.protobuf"
	kube, err := kubernetes.NewForConfig(kubeRC)
	if err != nil {
		return clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	mc, err := mcsclient.NewForConfig(rc)
	if err != nil {
		return clients{}, fmt.Errorf("multicluster client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return clients{}, fmt.Errorf("dynamic client: %w", err)
	}
	return clients{kube: kube, mcs: mc, dyn: dyn, host: rc.Host, health: health}, nil
}
