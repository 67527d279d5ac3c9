package members

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// A working member is replaced only by one that works. A Secret edit that
// registers its member anew (another host, CA or account: a typo, another
// cluster's CA) is tried beside a member that is healthy: the new
// configuration is probed and listed by a member of its own, whose
// informers feed nothing, and the member is registered anew from the
// Secret only once that one is healthy (its probe and first list
// succeeded). Until then the member goes on as it was, and the Secret is
// refused with why. A member that stops being healthy meanwhile is
// replaced at once, as it would have been without a trial. A new token
// alone, taken up in place (rotate.go), is first checked with one request
// the controller's account needs.

// candidate is a Secret's configuration on trial, as member m.
type candidate struct {
	secret *corev1.Secret
	m      *Member
}

// of reports whether the candidate is Secret s as it is now.
func (c *candidate) of(s *corev1.Secret) bool {
	return s.UID == c.secret.UID && s.ResourceVersion == c.secret.ResourceVersion
}

// try starts m, made of Secret s, beside the healthy member it would
// replace. The caller holds decide.
func (r *Registry) try(s *corev1.Secret, m *Member) {
	name := m.Name
	if c := r.candidates[name]; c != nil && c.of(s) {
		return // on trial already: another Secret's event reconciled the name
	}
	r.dropCandidate(name)
	m.Source += " (new configuration, on trial)"
	m.candidate = true
	r.candidates[name] = &candidate{secret: s, m: r.bounded(m)}
	klog.InfoS("Member Secret changed: its new configuration is tried before it replaces the member", "cluster", name, "secret", key(s))
	ignore := func(string, any) {}
	m.start(Handlers{Services: ignore, Slices: ignore, Exports: ignore, Imports: ignore, Changed: func(string) {
		go r.tried(name) // the candidate's probe calls this; tried may stop it
	}}, r.opts.ProbeEvery, r.opts.Ready)
}

// tried takes up what is known of the candidate of cluster name, if any:
// once it is healthy, or the member it would replace is not, the member is
// registered anew from its Secret; while it is not, the Secret is refused
// with why.
func (r *Registry) tried(name string) {
	r.decide.Lock()
	defer r.decide.Unlock()
	c := r.candidates[name]
	if c == nil {
		return
	}
	cur := r.get(name)
	if c.m.Healthy() || cur == nil || !cur.Healthy() || cur.secret != key(c.secret) {
		r.dropCandidate(name)
		r.registerAnew(c.secret)
		return
	}
	if ok, err := c.m.Reachable(); !ok && c.m.ProbedOnce() {
		r.refuse(c.secret, fmt.Errorf("%s: its new configuration does not work (%w); %s goes on as registered from the Secret's resourceVersion %s, and takes the new one up once it works", sourceOf(c.secret), err, name, cur.secretRV))
	}
}

// dropCandidate stops the candidate of cluster name, if any. The caller
// holds decide.
func (r *Registry) dropCandidate(name string) {
	if c := r.candidates[name]; c != nil {
		delete(r.candidates, name)
		c.m.stop()
	}
}

// dropCandidates stops every candidate, once the registry stops.
func (r *Registry) dropCandidates() {
	r.decide.Lock()
	defer r.decide.Unlock()
	for name := range r.candidates {
		r.dropCandidate(name)
	}
}

// tokenCheckTimeout bounds the check of a new token.
const tokenCheckTimeout = 5 * time.Second

// accepts checks that m's API server takes m's credentials for what the
// controller does there: it lists Namespaces, as the member's informers do.
func accepts(m *Member) error {
	ctx, cancel := context.WithTimeout(context.Background(), tokenCheckTimeout)
	defer cancel()
	_, err := m.Kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})
	return err
}
