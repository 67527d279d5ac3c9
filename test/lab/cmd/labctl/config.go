package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// kwokNodeAnnotation marks the nodes kwok manages.
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// prepare replaces the lab's state directory with a fresh one holding the
// credentials, kubeconfigs and kwok configurations of every cluster.
func (l *lab) prepare() (credentials, error) {
	if err := os.RemoveAll(l.dir); err != nil {
		return credentials{}, fmt.Errorf("removing the previous lab: %w", err)
	}
	dirs := []string{l.pkiDir(), filepath.Join(l.dir, "logs"), filepath.Join(l.dir, "run")}
	for _, c := range clusters {
		dirs = append(dirs, l.clusterDir(c))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return credentials{}, err
		}
	}
	if err := l.writeAuditPolicy(); err != nil {
		return credentials{}, err
	}
	ca, creds, err := l.writePKI()
	if err != nil {
		return credentials{}, err
	}
	for _, c := range clusters {
		if err := l.writeServingCert(ca, c); err != nil {
			return credentials{}, err
		}
		if err := clientcmd.WriteToFile(*kubeconfig(creds, c), l.componentKubeconfig(c)); err != nil {
			return credentials{}, fmt.Errorf("cluster %s: writing kubeconfig: %w", c.name, err)
		}
		if err := l.writeKwokConfig(c); err != nil {
			return credentials{}, err
		}
		if err := l.writeKubeProxyConfig(c); err != nil {
			return credentials{}, err
		}
	}
	if err := clientcmd.WriteToFile(*kubeconfig(creds, clusters...), l.kubeconfigPath()); err != nil {
		return credentials{}, fmt.Errorf("writing %s: %w", l.kubeconfigPath(), err)
	}
	return creds, nil
}

// kubeconfig has a cluster, a user and a context named after each of cs;
// the first is the current context.
func kubeconfig(creds credentials, cs ...cluster) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	for _, c := range cs {
		cfg.Clusters[c.name] = &clientcmdapi.Cluster{
			Server:                   "https://" + c.addr(apiserverPort),
			CertificateAuthorityData: creds.caPEM,
		}
		cfg.AuthInfos[c.name] = &clientcmdapi.AuthInfo{Token: creds.token}
		cfg.Contexts[c.name] = &clientcmdapi.Context{Cluster: c.name, AuthInfo: c.name}
	}
	cfg.CurrentContext = cs[0].name
	return cfg
}

func restConfig(creds credentials, c cluster) *rest.Config {
	return &rest.Config{
		Host:            "https://" + c.addr(apiserverPort),
		BearerToken:     creds.token,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.caPEM},
		UserAgent:       "labctl",
	}
}

// writeKwokConfig writes the Stages kwok plays on nodes and pods: nodes
// become Ready and keep a Lease; pods become Running and Ready with an
// address from their node's pod CIDR, and are removed once deleted. They
// are the stages kwok ships, compiled into labctl from the kwok module that
// builds the kwok binary.
func (l *lab) writeKwokConfig(c cluster) error {
	stages := []string{
		nodefast.DefaultNodeInit,
		nodeheartbeat.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	path := filepath.Join(l.clusterDir(c), "kwok.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(stages, "\n---\n")), 0o644); err != nil {
		return fmt.Errorf("cluster %s: writing kwok stages: %w", c.name, err)
	}
	return nil
}
