package main

import (
	"context"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// controllerNamespace is the controller's own namespace on the hub, where
// member Secrets register members (processes.go passes it).
const controllerNamespace = "mcs-system"

// joinCluster registers -join through a member Secret, as kubectl mcs join
// makes, and waits until every service's imported slice there holds its
// addresses: a new consumption cluster joining a running fleet. Timed from
// the Secret's creation.
func (b *bench) joinCluster(ctx context.Context) (*phase, error) {
	n, join := b.w.opts.services, b.w.opts.join
	p := &phase{name: "join", changes: n}
	log.Printf("%s joins: waiting until %d services are imported there", join, n)
	return p, b.observe(ctx, p, func() error {
		ctx, cancel := context.WithTimeout(ctx, b.w.opts.convergeTimeout)
		defer cancel()
		waits := make([][]awaited, n)
		for i := range n {
			waits[i] = b.watch.await([]string{join}, importedName(i), answerOf(b.w.addresses(i, b.w.versions[i])))
		}
		start := time.Now()
		if err := b.w.createMemberSecret(ctx, join); err != nil {
			return err
		}
		var done atomic.Int64
		stopProgress := progress(func() string { return fmt.Sprintf("%d of %d services imported into %s", done.Load(), n, join) })
		defer stopProgress()
		seen := make([]time.Time, n)
		var g errgroup.Group
		for i := range n {
			g.Go(func() (err error) {
				seen[i], err = b.seen(ctx, i, waits[i], answerOf(b.w.addresses(i, b.w.versions[i])))
				done.Add(1)
				return err
			})
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("%d of %d services imported into %s: %w", done.Load(), n, join, err)
		}
		for _, t := range seen {
			p.took = max(p.took, t.Sub(start))
		}
		b.consumers = b.w.consumers(true)
		log.Printf("%s joined: every service imported there %s after its Secret", join, p.took.Round(time.Millisecond))
		return nil
	})
}

// memberSecretName is the Secret that registers -join.
func (w *world) memberSecretName() string { return "propagation-bench-" + w.opts.join }

// createMemberSecret registers cluster with the controller: a Secret in its
// namespace on the hub, labelled with the cluster's name, holding a
// kubeconfig of the lab's with that one context and its credentials inline
// (the controller refuses file paths in a Secret's kubeconfig).
func (w *world) createMemberSecret(ctx context.Context, cluster string) error {
	cfg, err := clientcmd.LoadFromFile(w.opts.kubeconfig)
	if err != nil {
		return err
	}
	cfg.CurrentContext = cluster
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return err
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		return err
	}
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: w.memberSecretName(), Namespace: controllerNamespace, Labels: map[string]string{
			api.LabelCluster: cluster, api.LabelManagedBy: benchManagedBy,
		}},
		Data: map[string][]byte{"kubeconfig": data},
	}
	_, err = w.clients[hubCluster].CoreV1().Secrets(controllerNamespace).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("Secret %s/%s on the hub exists: a run before this one did not clean up; delete it", controllerNamespace, s.Name)
	}
	return err
}

// deleteMemberSecret deletes the Secret of -join, once the controller is
// stopped: deleted while it runs, the member would retire, and the
// controller delete everything it wrote there.
func (w *world) deleteMemberSecret(ctx context.Context) error {
	if w.opts.join == "" {
		return nil
	}
	return ignoreNotFound(w.clients[hubCluster].CoreV1().Secrets(controllerNamespace).Delete(ctx, w.memberSecretName(), metav1.DeleteOptions{}))
}
