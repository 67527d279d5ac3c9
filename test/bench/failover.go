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
	"github.com/coredns-mcs/coredns-mcs/test/bench/benchfixture"
)

// failoverCase is one LocalFirst service whose local endpoints the bench
// makes not enough and enough again: its last local endpoint turns not
// ready and ready. Its clusterset IP is outside the blocks of the other
// imports; it has one remote endpoint.
type failoverCase struct {
	name     string
	setIP    string
	localIPs []string
	remoteIP string
	minReady string // the import's minimum annotation; "" for none
}

// failoverCases: LocalFirst as it was, one local endpoint; and with a
// minimum of 2 ready local endpoints (spec.localFirst), two of them.
var failoverCases = []failoverCase{
	{name: "failover", setIP: "10.31.255.1", localIPs: []string{"10.31.255.3"}, remoteIP: "10.31.255.2"},
	{name: "failover-min", setIP: "10.31.254.1", localIPs: []string{"10.31.254.3", "10.31.254.4"}, remoteIP: "10.31.254.2", minReady: "2"},
}

// failoverTimeout bounds one switch: far above the target, it only stops a
// run that would never see the answer change.
const failoverTimeout = 10 * time.Second

// failoverResult is how long after the local slice's update the answer
// switched, per switch.
type failoverResult struct {
	fc         failoverCase
	over, back []time.Duration
}

// measureFailovers measures every case.
func measureFailovers(ctx context.Context, o options, w *world, s *server) ([]failoverResult, error) {
	var out []failoverResult
	for _, fc := range failoverCases {
		res, err := measureFailover(ctx, o, w, s, fc)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// measureFailover switches fc's last local endpoint between not ready and
// ready -failovers times and measures, from the moment the API server has
// accepted each update, how long until s answers the new choice of
// LocalFirst: the clusterset IP, then the local ClusterIP again. s is asked
// as fast as it answers.
func measureFailover(ctx context.Context, o options, w *world, s *server, fc failoverCase) (failoverResult, error) {
	res := failoverResult{fc: fc}
	clusterIP, err := w.ensureFailover(ctx, fc)
	if err != nil {
		return res, err
	}
	name := fqdn(fc.name, o.namespace, "cluster.local")
	c := &dns.Client{Timeout: time.Second}
	if _, err := waitAnswer(ctx, c, s.addr(), name, clusterIP); err != nil {
		return res, fmt.Errorf("%s: before the first switch: %w", fc.name, err)
	}
	for range o.failovers {
		for _, step := range []struct {
			ready bool
			want  string
			into  *[]time.Duration
		}{{false, fc.setIP, &res.over}, {true, clusterIP, &res.back}} {
			if err := w.setLocalReady(ctx, fc, step.ready); err != nil {
				return res, err
			}
			took, err := waitAnswer(ctx, c, s.addr(), name, step.want)
			if err != nil {
				return res, fmt.Errorf("%s: last local endpoint ready %t: %w", fc.name, step.ready, err)
			}
			*step.into = append(*step.into, took)
		}
	}
	log.Printf("%s through %s: p50 %s, p99 %s; back p50 %s, p99 %s", fc.name, s.Name(),
		pct(res.over, 0.5), pct(res.over, 0.99), pct(res.back, 0.5), pct(res.back, 0.99))
	return res, nil
}

// waitAnswer asks name until the A answer is want, and says how long that took.
func waitAnswer(ctx context.Context, c *dns.Client, addr, name, want string) (time.Duration, error) {
	expect := answersA(func(int) string { return want })
	start := time.Now()
	var last error
	for time.Since(start) < failoverTimeout {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		if last = ask(c, addr, name, dns.TypeA, expect, 0); last == nil {
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

// ensureFailover writes fc's objects (or finds them) with every local
// endpoint ready, and returns the Service's ClusterIP.
func (w *world) ensureFailover(ctx context.Context, fc failoverCase) (string, error) {
	ns := w.opts.namespace
	ip, err := w.createService(ctx, fc.name)
	if apierrors.IsAlreadyExists(err) {
		var svc *corev1.Service
		svc, err = w.kube.CoreV1().Services(ns).Get(ctx, fc.name, metav1.GetOptions{})
		if err == nil {
			ip = svc.Spec.ClusterIP
		}
	}
	if err != nil {
		return "", err
	}
	annotations := map[string]string{api.AnnotationStrategy: string(api.LocalFirst)}
	if fc.minReady != "" {
		annotations[api.AnnotationMinReadyEndpoints] = fc.minReady
	}
	imp := &mcsv1b1.ServiceImport{
		ObjectMeta: metav1.ObjectMeta{Name: fc.name, Namespace: ns, Annotations: annotations},
		Spec:       mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP, IPs: []string{fc.setIP}, Ports: []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
	}
	if _, err := w.mcs.MulticlusterV1beta1().ServiceImports(ns).Create(ctx, imp, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return "", fmt.Errorf("creating serviceimport %s: %w", fc.name, err)
	}
	remote := failoverSlice(ns, api.ImportedPrefix+benchfixture.ClusterName(0)+"-"+fc.name, []string{fc.remoteIP}, 1, map[string]string{
		mcsv1b1.LabelServiceName:     fc.name,
		mcsv1b1.LabelSourceCluster:   benchfixture.ClusterName(0),
		discoveryv1.LabelServiceName: api.DerivedPrefix + fc.name,
		discoveryv1.LabelManagedBy:   api.ManagedBy,
	})
	if _, err := w.kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, remote, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return "", fmt.Errorf("creating endpointslice %s: %w", remote.Name, err)
	}
	if err := w.setLocalReady(ctx, fc, true); err != nil {
		return "", err
	}
	return ip, nil
}

// setLocalReady writes fc's own slice, with the bench as its manager so
// that kube-controller-manager leaves it alone, its last endpoint ready or
// not and the others ready.
func (w *world) setLocalReady(ctx context.Context, fc failoverCase, ready bool) error {
	slices := w.kube.DiscoveryV1().EndpointSlices(w.opts.namespace)
	name := fc.name + "-local"
	nReady := len(fc.localIPs) - 1
	if ready {
		nReady++
	}
	s := failoverSlice(w.opts.namespace, name, fc.localIPs, nReady, map[string]string{
		discoveryv1.LabelServiceName: fc.name,
		discoveryv1.LabelManagedBy:   "bench.coredns-mcs.io",
	})
	cur, err := slices.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = slices.Create(ctx, s, metav1.CreateOptions{})
	case err == nil:
		s.ResourceVersion = cur.ResourceVersion
		_, err = slices.Update(ctx, s, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing endpointslice %s: %w", name, err)
	}
	return nil
}

// failoverSlice is a slice of ips, the first nReady of them ready.
func failoverSlice(ns, name string, ips []string, nReady int, labels map[string]string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](80)}},
	}
	for i, ip := range ips {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(i < nReady)}})
	}
	return s
}
