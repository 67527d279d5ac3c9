package main

import (
	"context"
	"fmt"
	"log"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// The failover service: LocalFirst, its clusterset IP outside the blocks of
// the other imports, one local and one remote endpoint.
const (
	failoverName  = "failover"
	failoverSetIP = "10.31.255.1"
	// failoverTimeout bounds one switch: far above the target, it only
	// stops a run that would never see the answer change.
	failoverTimeout = 10 * time.Second
)

// failoverResult is how long after the local slice's update the answer
// switched, per switch.
type failoverResult struct {
	server     string // the process asked
	over, back []time.Duration
}

// measureFailover switches the failover service's one local endpoint
// between not ready and ready -failovers times and measures, from the
// moment the API server has accepted each update, how long until s answers
// the new choice of LocalFirst: the clusterset IP, then the local ClusterIP
// again. s is asked as fast as it answers.
func measureFailover(ctx context.Context, o options, w *world, s *server) (failoverResult, error) {
	var res failoverResult
	clusterIP, err := w.ensureFailover(ctx)
	if err != nil {
		return res, err
	}
	name := fqdn(failoverName, o.namespace, "cluster.local")
	c := &dns.Client{Timeout: time.Second}
	if _, err := waitAnswer(ctx, c, s.addr(), name, clusterIP); err != nil {
		return res, fmt.Errorf("failover: before the first switch: %w", err)
	}
	for range o.failovers {
		for _, step := range []struct {
			ready bool
			want  string
			into  *[]time.Duration
		}{{false, failoverSetIP, &res.over}, {true, clusterIP, &res.back}} {
			if err := w.setLocalReady(ctx, step.ready); err != nil {
				return res, err
			}
			took, err := waitAnswer(ctx, c, s.addr(), name, step.want)
			if err != nil {
				return res, fmt.Errorf("failover: local ready %t: %w", step.ready, err)
			}
			*step.into = append(*step.into, took)
		}
	}
	log.Printf("failover through %s: p50 %s, p99 %s; back p50 %s, p99 %s", s.Name(),
		pct(res.over, 0.5), pct(res.over, 0.99), pct(res.back, 0.5), pct(res.back, 0.99))
	return res, nil
}

// waitAnswer asks name until the A answer is want, and says how long that took.
func waitAnswer(ctx context.Context, c *dns.Client, addr, name, want string) (time.Duration, error) {
	start := time.Now()
	var last error
	for time.Since(start) < failoverTimeout {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if last = check(c, addr, name, want); last == nil {
			return time.Since(start), nil
		}
	}
	return 0, fmt.Errorf("no answer %s within %s: %w", want, failoverTimeout, last)
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Sorted(slices.Values(ds))
	return percentile(sorted, p)
}

// ensureFailover writes the failover service's objects (or finds them) with
// the local endpoint ready, and returns the Service's ClusterIP.
func (w *world) ensureFailover(ctx context.Context) (string, error) {
	ns := w.opts.namespace
	ip, err := w.createService(ctx, failoverName)
	if apierrors.IsAlreadyExists(err) {
		var svc *corev1.Service
		svc, err = w.kube.CoreV1().Services(ns).Get(ctx, failoverName, metav1.GetOptions{})
		if err == nil {
			ip = svc.Spec.ClusterIP
		}
	}
	if err != nil {
		return "", err
	}
	imp := &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: failoverName, Namespace: ns, Annotations: map[string]string{api.AnnotationStrategy: string(api.LocalFirst)}},
		Spec:       mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP, IPs: []string{failoverSetIP}, Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if _, err := w.mcs.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, imp, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return "", fmt.Errorf("creating serviceimport %s: %w", failoverName, err)
	}
	remote := failoverSlice(ns, api.ImportedPrefix+clusterName(0)+"-"+failoverName, "10.31.255.2", true, map[string]string{
		mcsv1b1.LabelServiceName:     failoverName,
		mcsv1b1.LabelSourceCluster:   clusterName(0),
		discoveryv1.LabelServiceName: api.DerivedPrefix + failoverName,
		discoveryv1.LabelManagedBy:   api.ManagedBy,
	})
	if _, err := w.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, remote, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return "", fmt.Errorf("creating endpointslice %s: %w", remote.Name, err)
	}
	if err := w.setLocalReady(ctx, true); err != nil {
		return "", err
	}
	return ip, nil
}

// localSliceName is the failover service's own slice, with the bench as
// its manager so that kube-controller-manager leaves it alone.
const localSliceName = failoverName + "-local"

// setLocalReady writes the local slice with its endpoint ready or not.
func (w *world) setLocalReady(ctx context.Context, ready bool) error {
	slices := w.kube.DiscoveryV1().EndpointSlices(w.opts.namespace)
	s := failoverSlice(w.opts.namespace, localSliceName, "10.31.255.3", ready, map[string]string{
		discoveryv1.LabelServiceName: failoverName,
		discoveryv1.LabelManagedBy:   "bench.coredns-mcs.io",
	})
	cur, err := slices.Get(ctx, localSliceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.ResourceVersion = cur.ResourceVersion
		_, err = slices.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing endpointslice %s: %w", localSliceName, err)
	}
	return nil
}

func failoverSlice(ns, name, ip string, ready bool, labels map[string]string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}},
	}
}
