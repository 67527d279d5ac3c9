package members

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

const day = 24 * time.Hour

var t0 = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

// connectReal makes real clients of a Secret's config.
func connectReal(name, source string, rc *rest.Config) (*Member, error) {
	return fromConfig(name, source, rc, 5, 10)
}

// jwt is a token of the controller's account that expires at exp, signed
// by nobody: the controller verifies no signature.
func jwt(exp time.Time) string { return jwtClaims(map[string]any{"exp": exp.Unix()}) }

// jwtIssued is such a token issued at iat, as the API server says.
func jwtIssued(iat, exp time.Time) string {
	return jwtClaims(map[string]any{"iat": iat.Unix(), "exp": exp.Unix()})
}

func jwtClaims(claims map[string]any) string {
	claims["sub"] = credentials.Subject
	js, _ := json.Marshal(claims)
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(js) + ".c2ln"
}

func tokenKubeconfig(token string) string {
	return kubeconfig("https://member1.example:6443", "", "token: "+token)
}

// renewFixture is a registry of member1, registered by Secret member1 on a
// fake hub with a token that expires at t0 + 30 days, over a fake member
// that answers TokenRequests (after refusing the first fail ones); and the
// renewer of its tokens on a fake clock, which the tests step and run one
// item at a time (next).
type renewFixture struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	hub     *k8sfake.Clientset
	kube    *k8sfake.Clientset
	reg     *Registry
	w       *renewer
	fail    atomic.Int32
	changes atomic.Int32 // Handlers.Changed calls

	// limit caps the tokens the member issues, as clouds do; 0: no cap.
	limit time.Duration

	mu     sync.Mutex
	tokens []string // the TokenRequests' tokens, as the member answered them
}

func newRenewFixture(t *testing.T, healthy bool, renew RenewOptions) *renewFixture {
	return newCappedFixture(t, healthy, renew, jwt(t0.Add(30*day)), 0)
}

// newCappedFixture is a renewFixture whose member1 Secret holds token, and
// whose member issues tokens of at most limit (0: no cap).
func newCappedFixture(t *testing.T, healthy bool, renew RenewOptions, token string, limit time.Duration) *renewFixture {
	f := &renewFixture{t: t, clock: clocktesting.NewFakeClock(t0), limit: limit}
	member := fakeMember(t)
	f.kube = member.Kube.(*k8sfake.Clientset)
	f.kube.PrependReactor("create", "serviceaccounts", f.tokenRequest)
	secret := memberSecret("member1", "member1", 0, tokenKubeconfig(token))
	secret.ResourceVersion = "1"
	f.hub = k8sfake.NewSimpleClientset(secret)
	f.hub.PrependReactor("update", "secrets", f.update)
	ready := func(context.Context, *Member) error { return errors.New("down") }
	if healthy {
		ready = func(context.Context, *Member) error { return nil }
	}
	f.reg = runRegistry(t, Options{
		Hub: f.hub, Namespace: "mcs-system", ProbeEvery: time.Hour, Ready: ready, Clock: f.clock,
		Connect: func(name, source string, _ *rest.Config) (*Member, error) {
			return New(name, source, f.kube, member.MCS), nil
		},
	}, Handlers{Changed: func(string) { f.changes.Add(1) }})
	renew.Clock = f.clock
	f.w = f.reg.startRenewals(renew)
	t.Cleanup(f.w.queue.ShutDown)
	return f
}

// update is a Secret update as the API server makes it: at the
// resourceVersion given, if any, and to a new one.
func (f *renewFixture) update(a clienttesting.Action) (bool, runtime.Object, error) {
	s := a.(clienttesting.UpdateAction).GetObject().(*corev1.Secret).DeepCopy()
	stored, err := f.hub.Tracker().Get(a.GetResource(), s.Namespace, s.Name)
	if err != nil {
		return true, nil, err
	}
	rv, _ := strconv.Atoi(stored.(*corev1.Secret).ResourceVersion)
	if s.ResourceVersion != "" && s.ResourceVersion != strconv.Itoa(rv) {
		return true, nil, apierrors.NewConflict(a.GetResource().GroupResource(), s.Name, fmt.Errorf("resourceVersion %s, stored %d", s.ResourceVersion, rv))
	}
	s.ResourceVersion = strconv.Itoa(rv + 1)
	return true, s, f.hub.Tracker().Update(a.GetResource(), s, s.Namespace)
}

func (f *renewFixture) tokenRequest(a clienttesting.Action) (bool, runtime.Object, error) {
	if a.GetSubresource() != "token" || a.GetNamespace() != credentials.Namespace || a.(clienttesting.CreateAction).GetObject() == nil {
		return false, nil, nil
	}
	if f.fail.Add(-1) >= 0 {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	}
	tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
	lifetime := time.Duration(*tr.Spec.ExpirationSeconds) * time.Second
	if f.limit > 0 {
		lifetime = min(lifetime, f.limit)
	}
	now := f.clock.Now()
	tr.Status = authenticationv1.TokenRequestStatus{Token: jwtIssued(now, now.Add(lifetime)), ExpirationTimestamp: metav1.NewTime(now.Add(lifetime))}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tokens = append(f.tokens, tr.Status.Token)
	return true, tr, nil
}

// step moves the clock by d once the renewer's queue waits for an item
// (its heartbeat is the other waiter), and handles the item that is then
// ready.
func (f *renewFixture) step(d time.Duration) {
	f.t.Helper()
	eventually(f.t, func() error {
		if n := f.clock.Waiters(); n < 2 {
			return fmt.Errorf("the renewer's queue has %d waiters on the clock, want its heartbeat and an item", n)
		}
		return nil
	})
	f.clock.Step(d)
	f.w.next(context.Background())
}

// written is what the member was asked for tokens, and the hub's Secret
// updates.
func (f *renewFixture) written() (tokenRequests, secretUpdates int) {
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "token" {
			tokenRequests++
		}
	}
	for _, a := range f.hub.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			secretUpdates++
			if a.GetVerb() != "update" || a.GetResource().Resource != "secrets" {
				f.t.Errorf("the hub got %s %s, want Secret updates only", a.GetVerb(), a.GetResource().Resource)
			}
		}
	}
	return tokenRequests, secretUpdates
}

func (f *renewFixture) wrote(tokenRequests, secretUpdates int) {
	f.t.Helper()
	if tr, su := f.written(); tr != tokenRequests || su != secretUpdates {
		f.t.Fatalf("%d TokenRequests and %d Secret updates, want %d and %d", tr, su, tokenRequests, secretUpdates)
	}
}

// secretToken is the token of the hub's Secret member1, and its
// annotation of when it expires.
func (f *renewFixture) secretToken() (token, expires string) {
	s, err := f.hub.CoreV1().Secrets("mcs-system").Get(context.Background(), "member1", metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg, err := clientcmd.Load(s.Data[api.KeyKubeconfig])
	if err != nil {
		f.t.Fatal(err)
	}
	return cfg.AuthInfos["u"].Token, s.Annotations[api.AnnotationCredentialExpires]
}

func expiryIs(t *testing.T, cluster string, want time.Time) {
	t.Helper()
	eventually(t, func() error {
		if got := testutil.ToFloat64(expiryGauge.WithLabelValues(cluster)); got != float64(want.Unix()) {
			return fmt.Errorf("mcs_member_credential_expiry_timestamp_seconds{cluster=%q} = %v, want %d (%s)", cluster, got, want.Unix(), want)
		}
		return nil
	})
}

// A token is renewed at its renewal point, not before: a TokenRequest of
// the controller's account made with the member's token, and the hub's
// Secret updated with the new token and its expiry, at the resourceVersion
// it registered the member at.
func TestTokenRenewedBeforeItExpires(t *testing.T) {
	f := newRenewFixture(t, false, RenewOptions{Before: 7 * day, Duration: 30 * day})
	expiryIs(t, "member1", t0.Add(30*day))

	f.step(renewRetryMin) // the look the registration scheduled
	f.wrote(0, 0)
	if n := f.w.queue.NumRequeues("member1"); n != 0 {
		t.Errorf("%d requeues of a token not due, want none: it waits for its renewal point", n)
	}

	f.step(23*day - renewRetryMin)
	f.wrote(1, 1)
	token, expires := f.secretToken()
	renewed := t0.Add(23 * day).Add(30 * day)
	if token != f.tokens[0] || expires != renewed.Format(time.RFC3339) {
		t.Errorf("the Secret holds token %q expiring %s, want the new %q expiring %s", token, expires, f.tokens[0], renewed.Format(time.RFC3339))
	}
	req := f.kube.Actions()[len(f.kube.Actions())-1].(clienttesting.CreateAction)
	if req.GetResource().Resource != "serviceaccounts" || req.GetNamespace() != "mcs-system" || req.(clienttesting.CreateActionImpl).Name != "mcs-member" {
		t.Errorf("the TokenRequest went to %s %s/%s, want the ServiceAccount mcs-system/mcs-member", req.GetResource().Resource, req.GetNamespace(), req.(clienttesting.CreateActionImpl).Name)
	}
	for _, a := range f.hub.Actions() {
		if u, ok := a.(clienttesting.UpdateAction); ok && u.GetObject().(*corev1.Secret).ResourceVersion != "1" {
			t.Errorf("the Secret was updated at resourceVersion %q, want 1, the one that registered the member, as precondition", u.GetObject().(*corev1.Secret).ResourceVersion)
		}
	}
	// The update registers the new token, whose expiry is exported.
	expiryIs(t, "member1", renewed)
}

// A member whose API server caps tokens at a day, as EKS does, has its
// token renewed once two thirds of each one's lifetime have passed: once
// every 16 hours, not the moment each is issued because it expires within
// --renew-credentials-before. When the renewal is due is exported.
func TestCappedTokenRenewedOncePerLifetime(t *testing.T) {
	f := newCappedFixture(t, false, RenewOptions{Before: 7 * day, Duration: 30 * day}, jwtIssued(t0, t0.Add(day)), day)
	f.step(renewRetryMin)
	f.wrote(0, 0)
	renewalIs(t, "member1", t0.Add(16*time.Hour))

	f.step(16*time.Hour - renewRetryMin)
	f.wrote(1, 1)
	expiryIs(t, "member1", t0.Add(40*time.Hour))
	f.step(renewRetryMin) // the look the Secret's update scheduled
	f.wrote(1, 1)
	renewalIs(t, "member1", t0.Add(32*time.Hour))

	f.step(16*time.Hour - renewRetryMin)
	f.wrote(2, 2)
}

func renewalIs(t *testing.T, cluster string, want time.Time) {
	t.Helper()
	eventually(t, func() error {
		if got := testutil.ToFloat64(renewalGauge.WithLabelValues(cluster)); got != float64(want.Unix()) {
			return fmt.Errorf("mcs_member_credential_renewal_timestamp_seconds{cluster=%q} = %v, want %d (%s)", cluster, got, want.Unix(), want)
		}
		return nil
	})
}

// A TokenRequest that fails is retried with exponential back-off, and
// nothing is written on the hub until one succeeds.
func TestFailedRenewalRetriedWithBackOff(t *testing.T) {
	f := newRenewFixture(t, false, RenewOptions{Before: 31 * day, Duration: 60 * day})
	f.fail.Store(2)
	f.step(renewRetryMin) // due at once: it expires in 30 days
	f.wrote(1, 0)
	f.step(2 * renewRetryMin)
	f.wrote(2, 0)
	if n := f.w.queue.NumRequeues("member1"); n != 3 {
		t.Errorf("%d requeues, want 3: the registration's, then two failures", n)
	}
	f.step(4 * renewRetryMin)
	f.wrote(3, 1)
	if token, _ := f.secretToken(); token != f.tokens[0] {
		t.Errorf("the Secret holds %q, want the renewed %q", token, f.tokens[0])
	}
}

// A new token for a healthy member, all else in its Secret the same, is
// taken up in place: the same member, its informers as they were, no
// change reported to the controller (nothing it provides or consumes
// changes, no imported slice is deleted), and its next requests send the
// new token.
func TestTokenRotatedInPlace(t *testing.T) {
	f := newRenewFixture(t, true, RenewOptions{Before: 7 * day, Duration: 30 * day})
	m := registeredBy(t, f.reg, "member1", "secret mcs-system/member1")
	// Its registration, first probe and synced informers are each news,
	// the last reported a moment after Err turns nil: wait for all three.
	eventually(t, func() error {
		if n := f.changes.Load(); n < 3 {
			return fmt.Errorf("%d changes reported since the member's registration, want 3", n)
		}
		return m.Err()
	})
	caches, changes := m.current(), f.changes.Load()

	newToken := jwt(t0.Add(40 * day))
	s := memberSecret("member1", "member1", 0, tokenKubeconfig(newToken))
	if _, err := f.hub.CoreV1().Secrets("mcs-system").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiryIs(t, "member1", t0.Add(40*day))
	if cur := f.reg.get("member1"); cur != m || m.current() != caches || !m.Healthy() {
		t.Errorf("the member was registered anew (%p, was %p), or its informers replaced, or it is not healthy: %v", cur, m, m.Err())
	}
	if got, _ := m.token.Token(); got.AccessToken != newToken {
		t.Errorf("the member's requests send %q, want the new token", got.AccessToken)
	}
	if got := f.changes.Load(); got != changes {
		t.Errorf("%d changes reported during the rotation, want none", got-changes)
	}
	for _, a := range f.kube.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("the member got %s %s during the rotation", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// Anything else that changes registers the member anew: here its server.
func TestOtherChangeRegistersAnew(t *testing.T) {
	f := newRenewFixture(t, true, RenewOptions{Before: 7 * day, Duration: 30 * day})
	m := registeredBy(t, f.reg, "member1", "secret mcs-system/member1")
	s := memberSecret("member1", "member1", 0, kubeconfig("https://member1.other:6443", "", "token: "+jwt(t0.Add(40*day))))
	if _, err := f.hub.CoreV1().Secrets("mcs-system").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if f.reg.get("member1") == m {
			return errors.New("member1 is still the member registered before the change")
		}
		return nil
	})
}

// The member's clients send the token its source holds now.
func TestRequestsSendTheCurrentToken(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Header.Get("Authorization"))
		_, _ = w.Write([]byte("ok"))
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL, BearerToken: "first"}
	src := takeToken(rc)
	m, err := connectReal("member1", "test", rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, token := range []string{"first", "second"} {
		src.set(token)
		if err := Readyz(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"Bearer first", "Bearer second"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("requests sent %q, want %q", got, want)
	}
}
