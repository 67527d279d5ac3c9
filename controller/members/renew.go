package members

import (
	"context"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// The tokens kubectl mcs join writes into member Secrets last 30 days, and
// members joined the same day would lose them the same day. The registry
// renews each one Before its expiry, or once two thirds of its lifetime
// have passed when Before takes more than nine tenths of it, as when the
// member's API server caps tokens shorter (credentials.RenewAt): a TokenRequest for the controller's
// own ServiceAccount, made with the member's current token (the member's
// RBAC allows that account its own tokens and no other's), written back
// into the Secret it came from with that Secret's resourceVersion as
// precondition; the Secret's update then takes the new token up
// (rotate.go). A failed renewal is retried with the queue's exponential
// back-off. When each member's renewal is due is exported, so that an
// alert tells a renewal that keeps failing from one not yet due.

// RenewOptions say when tokens are renewed.
type RenewOptions struct {
	// Before is how long before its expiry a token is renewed; Duration
	// how long a new one is asked for (the member's API server may cap it).
	Before, Duration time.Duration
	// Clock schedules the renewals; nil: the real clock.
	Clock clock.WithTicker
}

const (
	renewTimeout = 30 * time.Second
	// The back-off of a renewal that failed, or is due again at once.
	renewRetryMin, renewRetryMax = time.Second, 10 * time.Minute
	// fieldManager is the controller's name in the Secrets' managedFields.
	fieldManager = "mcs-controller"
)

type renewer struct {
	reg   *Registry
	opts  RenewOptions
	queue workqueue.TypedRateLimitingInterface[string] // of member names
}

// RenewTokens renews the members' tokens until ctx ends. One replica only
// may run it, or every replica would renew every token: mcs-controller
// runs it on the replica that holds shard 0.
func (r *Registry) RenewTokens(ctx context.Context, o RenewOptions) {
	w := r.startRenewals(o)
	if w == nil {
		return
	}
	go func() {
		<-ctx.Done()
		r.renewals.CompareAndSwap(w, nil)
		w.queue.ShutDown()
		// Another replica renews from now on, and says when.
		renewalGauge.Reset()
	}()
	for w.next(ctx) {
	}
}

// startRenewals schedules the renewal of every member registered, and of
// every member registered from now on; nil without member Secrets.
func (r *Registry) startRenewals(o RenewOptions) *renewer {
	if r.lister == nil {
		return nil
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	w := &renewer{reg: r, opts: o, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](renewRetryMin, renewRetryMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "member_credentials", Clock: o.Clock})}
	r.renewals.Store(w)
	for _, m := range r.List() {
		w.queue.AddRateLimited(m.Name)
	}
	return w
}

// registered exports when the credentials of m, just registered, expire,
// says so when they are not renewed, and schedules their renewal.
func (r *Registry) registered(m *Member) {
	c := m.credential
	if c.Expires.IsZero() {
		expiryGauge.DeleteLabelValues(m.Name)
	} else {
		expiryGauge.WithLabelValues(m.Name).Set(float64(c.Expires.Unix()))
	}
	if c.NotRenewed != nil && m.Kube != nil {
		klog.InfoS("Member credentials are not renewed", "cluster", m.Name, "source", m.Source, "reason", c.NotRenewed.Error(), "expires", expiresOrUnknown(c.Expires))
	}
	if w := r.renewals.Load(); w != nil {
		w.queue.AddRateLimited(m.Name)
	}
}

func expiresOrUnknown(t time.Time) string {
	if t.IsZero() {
		return "unknown"
	}
	return t.UTC().Format(time.RFC3339)
}

func (w *renewer) next(ctx context.Context) bool {
	name, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(name)
	w.handle(ctx, name)
	return true
}

// handle renews the member's token once it is due, or schedules it.
func (w *renewer) handle(ctx context.Context, name string) {
	due, ok := w.reg.renewalOf(name)
	if !ok {
		renewalGauge.DeleteLabelValues(name)
		w.queue.Forget(name)
		return
	}
	at := due.credential.RenewAt(w.opts.Before)
	renewalGauge.WithLabelValues(name).Set(float64(at.Unix()))
	if wait := at.Sub(w.opts.Clock.Now()); wait > 0 {
		w.queue.Forget(name)
		w.queue.AddAfter(name, wait)
		return
	}
	if err := w.renew(ctx, due); err != nil {
		klog.ErrorS(err, "Cannot renew a member's token: retrying with back-off", "cluster", name, "secret", key(due.secret), "expires", due.credential.Expires.UTC(), "retries", w.queue.NumRequeues(name))
		w.queue.AddRateLimited(name)
	}
	// Renewed: the Secret's update schedules the next renewal.
}

// renewal is a member's token to renew, and the Secret it came from.
type renewal struct {
	member     *Member
	secret     *corev1.Secret
	credential credentials.Credential
}

// renewalOf is the renewal of the member's token, when the controller
// renews it: registered from a Secret still labelled with its name and as
// it was registered (a newer version is being decided on, and schedules
// its own renewal).
func (r *Registry) renewalOf(name string) (renewal, bool) {
	r.decide.Lock()
	defer r.decide.Unlock()
	m := r.get(name)
	if m == nil || m.secret == "" || m.token == nil || m.Retiring() || m.credential.NotRenewed != nil || m.credential.Expires.IsZero() {
		return renewal{}, false
	}
	namespace, secret, _ := strings.Cut(m.secret, "/")
	s, err := r.lister.Secrets(namespace).Get(secret)
	if err != nil || s.ResourceVersion != m.secretRV || s.Labels[api.LabelCluster] != name {
		return renewal{}, false
	}
	return renewal{member: m, secret: s, credential: m.credential}, true
}

// renew asks the member for a new token of the controller's account and
// writes it into the Secret.
func (w *renewer) renew(ctx context.Context, due renewal) error {
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	name := due.member.Name
	tr, err := due.member.Control.CoreV1().ServiceAccounts(credentials.Namespace).CreateToken(ctx, credentials.ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(w.opts.Duration / time.Second))},
	}, metav1.CreateOptions{})
	CountWrite(name, "TokenRequest", "create", err)
	if err != nil {
		return fmt.Errorf("%s (%s): a token of %s/%s: %w", name, due.member.Source, credentials.Namespace, credentials.ServiceAccount, err)
	}
	s, err := withToken(due.secret, tr)
	if err != nil {
		return fmt.Errorf("%s (%s): %w", name, due.member.Source, err)
	}
	_, err = w.reg.opts.Hub.CoreV1().Secrets(s.Namespace).Update(ctx, s, metav1.UpdateOptions{FieldManager: fieldManager})
	CountWrite("hub", "Secret", "update", err)
	if err != nil {
		return fmt.Errorf("the hub: Secret %s: %w", key(s), err)
	}
	klog.InfoS("Member token renewed", "cluster", name, "secret", key(s), "expires", tr.Status.ExpirationTimestamp.UTC())
	return nil
}

// withToken is Secret s with the token tr in its kubeconfig, and its
// expiry in its annotation. The kubeconfig was checked when s registered
// the member (untrustedConfig): only its one user's token changes.
func withToken(s *corev1.Secret, tr *authenticationv1.TokenRequest) (*corev1.Secret, error) {
	token := tr.Status.Token
	if token == "" || len(token) > credentials.MaxToken {
		return nil, fmt.Errorf("the member answered a token of %d bytes, want 1 to %d", len(token), credentials.MaxToken)
	}
	cfg, err := clientcmd.Load(s.Data[api.KeyKubeconfig])
	if err != nil {
		return nil, fmt.Errorf("Secret %s: key %s: %w", key(s), api.KeyKubeconfig, err)
	}
	name, err := onlyContext(cfg)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: key %s: %w", key(s), api.KeyKubeconfig, err)
	}
	u := cfg.AuthInfos[cfg.Contexts[name].AuthInfo]
	if u == nil || u.Token == "" {
		return nil, fmt.Errorf("Secret %s: key %s: context %q has no token to replace", key(s), api.KeyKubeconfig, name)
	}
	u.Token = token
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: key %s: %w", key(s), api.KeyKubeconfig, err)
	}
	out := s.DeepCopy()
	out.Data[api.KeyKubeconfig] = data
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[api.AnnotationCredentialExpires] = tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339)
	return out, nil
}
