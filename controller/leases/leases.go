// Package leases renews the Leases source-<cluster> that tell coredns-mcs
// whether mcs-controller can still watch a provision cluster: while it can,
// the Lease in every member is renewed; when it cannot, the Lease expires
// and coredns-mcs prefers other clusters' endpoints over that cluster's
// last known ones, which are kept, never deleted.
package leases

import (
	"context"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// Renewer renews, every Every, a Lease of Duration per pair of a healthy
// member (the provider) and a reachable member (the consumer).
type Renewer struct {
	Members  *members.Registry
	Holder   string
	Duration time.Duration
	Every    time.Duration

	mu   sync.Mutex
	last map[pair]*coordv1.Lease // as last written: renewals need no read
	busy map[string]bool         // consumers whose round is running
	wg   sync.WaitGroup
}

type pair struct{ consumer, provider string }

// Run renews until ctx ends, and waits for the renewals under way.
func (r *Renewer) Run(ctx context.Context) {
	r.last, r.busy = map[pair]*coordv1.Lease{}, map[string]bool{}
	wait.UntilWithContext(ctx, r.renewAll, r.Every)
	r.wg.Wait()
}

// renewAll starts a round of renewals in every reachable consumer whose
// previous round is done. Rounds run on their own and nobody waits for
// them, so a consumer that hangs on writes (a stuck webhook, an overloaded
// etcd) delays no other consumer's Leases: only its own round runs late.
func (r *Renewer) renewAll(ctx context.Context) {
	all := r.Members.List()
	var healthy []string
	for _, m := range all {
		if m.Healthy() {
			healthy = append(healthy, m.Name)
		}
	}
	for _, c := range all {
		if ok, _ := c.Reachable(); !ok || c.Retiring() || !r.claim(c.Name) {
			continue
		}
		r.wg.Go(func() {
			defer r.release(c.Name)
			for _, p := range healthy {
				r.report(c, p, r.renew(ctx, c, p))
			}
		})
	}
}

func (r *Renewer) claim(consumer string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.busy[consumer] {
		return false
	}
	r.busy[consumer] = true
	return true
}

func (r *Renewer) release(consumer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.busy, consumer)
}

func (r *Renewer) report(c *members.Member, provider string, err error) {
	switch {
	case apierrors.IsConflict(err):
		// Another writer renewed it (a controller handing over the lead):
		// it is read again next time.
		klog.V(2).InfoS("Lease renewed by another writer", "cluster", c.Name, "lease", api.LeasePrefix+provider)
	case err != nil:
		klog.ErrorS(err, "Cannot renew Lease", "cluster", c.Name, "lease", api.LeasePrefix+provider)
	}
}

// renew renews one Lease, within half the renewal interval: a renewal that
// takes longer would be late anyway, and the Lease outlasts several.
func (r *Renewer) renew(ctx context.Context, c *members.Member, provider string) error {
	ctx, cancel := context.WithTimeout(ctx, r.Every/2)
	defer cancel()
	k := pair{c.Name, provider}
	r.mu.Lock()
	l := r.last[k]
	r.mu.Unlock()
	client := c.Control.CoordinationV1().Leases(api.LeaseNamespace)
	if l == nil {
		got, err := client.Get(ctx, api.LeasePrefix+provider, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return r.create(ctx, c, k)
		case err != nil:
			return err
		}
		l = got
	}
	upd := l.DeepCopy()
	r.fill(upd)
	got, err := client.Update(ctx, upd, metav1.UpdateOptions{})
	members.CountWrite(c.Name, "Lease", "update", err)
	r.remember(k, got, err)
	return err
}

// create makes the Lease. Its namespace is made only when it is missing
// (a member set up by hand): deploy/member makes it, and the member's
// admission policy refuses the controller any write in it, the Namespace's
// own included, so that writing it first would fail with Forbidden where
// the namespace exists.
func (r *Renewer) create(ctx context.Context, c *members.Member, k pair) error {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: api.LeaseNamespace,
		Name:      api.LeasePrefix + k.provider,
		Labels:    map[string]string{api.LabelManagedBy: api.ManagedBy},
	}}
	r.fill(l)
	leases := c.Control.CoordinationV1().Leases(api.LeaseNamespace)
	got, err := leases.Create(ctx, l, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: api.LeaseNamespace, Labels: map[string]string{api.LabelManagedBy: api.ManagedBy}}}
		_, err = c.Control.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		members.CountWrite(c.Name, "Namespace", "create", err)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		got, err = leases.Create(ctx, l, metav1.CreateOptions{})
	}
	members.CountWrite(c.Name, "Lease", "create", err)
	r.remember(k, got, err)
	return err
}

func (r *Renewer) fill(l *coordv1.Lease) {
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity = ptr.To(r.Holder)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(r.Duration / time.Second))
	l.Spec.RenewTime = &now
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
}

// remember keeps the written Lease for the next renewal, or forgets it
// after an error (a conflict: another writer; it is read again next time).
func (r *Renewer) remember(k pair, l *coordv1.Lease, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		delete(r.last, k)
		return
	}
	r.last[k] = l
}
