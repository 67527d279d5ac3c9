package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os/exec"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// What a failover order costs a consumer: the first -order-services
// services are given LocalFirst with failoverOrder [member1], which makes
// the controller write a provider Service (a ClusterIP) and a copy of each
// of member1's imported slices into every consumer, and member2's
// kube-proxy program that Service; the footprint in member2 is counted
// before and after, and the services are put back as they were.

// orderedSpec and unorderedSpec are the merge patches that give a
// service its order and take it away again.
var (
	orderedSpec   = fmt.Sprintf(`{"spec":{"strategy":%q,"localFirst":{"failoverOrder":[%q]}}}`, api.LocalFirst, providerCluster)
	unorderedSpec = fmt.Sprintf(`{"spec":{"strategy":%q,"localFirst":null}}`, api.RemoteAndLocal)
)

// footprint is what the consumer holds of the benchmark's services.
type footprint struct {
	services, providerServices int // ClusterIP Services of the controller's; of them provider Services
	slices, providerSlices     int // its EndpointSlices; of them copies for provider Services
	rules, elements            int // kube-proxy's nftables table (ip): rules, and elements of its maps and sets
}

// orderCost is the phase's result.
type orderCost struct {
	services      int
	before, after footprint
	took          time.Duration // the orders written → every provider Service and copy there, kube-proxy settled
}

// orderCost gives the first n services an order, counts, and takes it away.
func (b *bench) orderCost(ctx context.Context, n int) (*orderCost, error) {
	w, consumer := b.w, consumerCluster
	res := &orderCost{services: n}
	var err error
	if res.before, err = w.settledFootprint(ctx, consumer); err != nil {
		return nil, err
	}
	log.Printf("order: %d services given failoverOrder [%s]", n, providerCluster)
	start := time.Now()
	if err := w.patchMCS(ctx, n, orderedSpec); err != nil {
		return nil, err
	}
	if err := w.awaitProviderObjects(ctx, consumer, n); err != nil {
		return nil, err
	}
	if res.after, err = w.settledFootprint(ctx, consumer); err != nil {
		return nil, err
	}
	res.took = time.Since(start)
	log.Printf("order: taken away again")
	if err := w.patchMCS(ctx, n, unorderedSpec); err != nil {
		return nil, err
	}
	return res, w.awaitProviderObjects(ctx, consumer, 0)
}

// patchMCS merge-patches the MultiClusterServices of the first n services.
func (w *world) patchMCS(ctx context.Context, n int, patch string) error {
	return forEach(ctx, w.opts.workers, n, func(ctx context.Context, i int) error {
		_, err := w.hubDyn.Resource(v1alpha1.MultiClusterServiceResource).Namespace(w.opts.namespace).Patch(ctx, serviceName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("patching multiclusterservice %s/%s on the hub: %w", w.opts.namespace, serviceName(i), err)
		}
		return nil
	})
}

// awaitProviderObjects waits until cluster holds n provider Services with
// a ClusterIP and n copies (one source slice per service).
func (w *world) awaitProviderObjects(ctx context.Context, cluster string, n int) error {
	var fp footprint
	err := wait.PollUntilContextTimeout(ctx, time.Second, w.opts.burstTimeout, true, func(ctx context.Context) (bool, error) {
		var err error
		fp, err = w.objectFootprint(ctx, cluster)
		return err == nil && fp.providerServices == n && fp.providerSlices == n, nil
	})
	if err != nil {
		return fmt.Errorf("order: %s holds %d provider Services and %d copies, want %d each: %w", cluster, fp.providerServices, fp.providerSlices, n, err)
	}
	return nil
}

// settledFootprint counts once kube-proxy's table has stayed the same for
// a few seconds: it programs a Service a moment after the API has it.
func (w *world) settledFootprint(ctx context.Context, cluster string) (footprint, error) {
	const still = 3
	var last footprint
	same := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, w.opts.burstTimeout, true, func(ctx context.Context) (bool, error) {
		fp, err := w.objectFootprint(ctx, cluster)
		if err != nil {
			return false, err
		}
		if fp.rules, fp.elements, err = nftFootprint(cluster); err != nil {
			return false, err
		}
		if fp == last {
			same++
		} else {
			last, same = fp, 0
		}
		return same >= still, nil
	})
	return last, err
}

// objectFootprint counts the controller's Services and EndpointSlices in
// the benchmark's namespace of cluster.
func (w *world) objectFootprint(ctx context.Context, cluster string) (footprint, error) {
	var fp footprint
	svcs, err := w.clients[cluster].CoreV1().Services(w.opts.namespace).List(ctx, metav1.ListOptions{LabelSelector: api.LabelManagedBy + "=" + api.ManagedBy})
	if err != nil {
		return fp, err
	}
	for _, s := range svcs.Items {
		if s.Spec.ClusterIP == "" || s.Spec.ClusterIP == "None" {
			continue
		}
		fp.services++
		if api.IsProviderService(s.Name) {
			fp.providerServices++
		}
	}
	slices, err := w.clients[cluster].DiscoveryV1().EndpointSlices(w.opts.namespace).List(ctx, metav1.ListOptions{LabelSelector: "endpointslice.kubernetes.io/managed-by=" + api.ManagedBy})
	if err != nil {
		return fp, err
	}
	for _, s := range slices.Items {
		fp.slices++
		if strings.HasPrefix(s.Name, api.ProviderSlicePrefix) {
			fp.providerSlices++
		}
	}
	return fp, nil
}

// nftFootprint counts the rules of kube-proxy's table in cluster's node
// (the lab's network namespace mcs-lab-<cluster>), and the elements of its
// maps and sets, where kube-proxy's nftables mode keeps most per-Service
// state (test/lab/README.md).
func nftFootprint(cluster string) (rules, elements int, err error) {
	out, err := exec.Command("ip", "netns", "exec", "mcs-lab-"+cluster, "nft", "-j", "list", "table", "ip", "kube-proxy").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("kube-proxy's nftables table in %s: %w", cluster, err)
	}
	var table struct {
		Nftables []struct {
			Rule *json.RawMessage `json:"rule"`
			Map  *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"map"`
			Set *struct {
				Elem []json.RawMessage `json:"elem"`
			} `json:"set"`
		} `json:"nftables"`
	}
	if err := json.Unmarshal(out, &table); err != nil {
		return 0, 0, fmt.Errorf("kube-proxy's nftables table in %s: %w", cluster, err)
	}
	for _, o := range table.Nftables {
		switch {
		case o.Rule != nil:
			rules++
		case o.Map != nil:
			elements += len(o.Map.Elem)
		case o.Set != nil:
			elements += len(o.Set.Elem)
		}
	}
	return rules, elements, nil
}

// orderTable reports the footprint before and after, and per ordered
// service.
func (r *results) orderTable(b *strings.Builder) {
	o := r.order
	if o == nil {
		return
	}
	fmt.Fprintf(b, "\n## What a failover order costs\n\n")
	fmt.Fprintf(b, "%d of the services given LocalFirst with `failoverOrder: [%s]`: in %s, the controller's ClusterIP Services and EndpointSlices of the namespace and the rules and map and set elements of kube-proxy's nftables table (ip), settled, before and after; then put back. Every ordered service's provider Service and copies were there, and kube-proxy settled, %s after the orders were written.\n\n",
		o.services, providerCluster, consumerCluster, o.took.Round(time.Millisecond))
	fmt.Fprintf(b, "| | without | with | more per ordered service |\n|---|---|---|---|\n")
	row := func(what string, before, after int) {
		fmt.Fprintf(b, "| %s | %d | %d | %.2f |\n", what, before, after, float64(after-before)/float64(o.services))
	}
	row("ClusterIP Services (ClusterIPs)", o.before.services, o.after.services)
	row("EndpointSlices", o.before.slices, o.after.slices)
	row("kube-proxy nftables rules (a Service's one rule holds its endpoints in a map of its own)", o.before.rules, o.after.rules)
	row("kube-proxy map and set elements", o.before.elements, o.after.elements)
}
