package members

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"sync/atomic"

	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
	"k8s.io/klog/v2"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// A member Secret whose token alone changed (renewed by the controller, or
// kubectl mcs join run again) is taken up in place when the member is
// healthy: its clients send the new token from their next request on, and
// its informers go on as they are, so nothing it provides or consumes
// changes meanwhile, not even for the time a new list would take. Any
// other change registers the member anew, and so does a new token of a
// member that is not healthy: fresh informers list it with the new token
// at once, where the old ones would first wait out the back-off that the
// old token's refusal (a revoked account) put them in.

// tokenSource is what every request of a member's clients authenticates
// with: the token of its Secret, replaced in place.
type tokenSource struct{ token atomic.Pointer[string] }

func (s *tokenSource) Token() (*oauth2.Token, error) {
	return &oauth2.Token{AccessToken: *s.token.Load(), TokenType: "Bearer"}, nil
}

func (s *tokenSource) set(token string) { s.token.Store(&token) }

// takeToken moves rc's token into a source of its own; nil without one.
func takeToken(rc *rest.Config) *tokenSource {
	if rc.BearerToken == "" {
		return nil
	}
	s := &tokenSource{}
	s.set(rc.BearerToken)
	rc.BearerToken = ""
	rc.Wrap(transport.TokenSourceWrapTransport(s))
	return s
}

// fingerprint is of everything a Secret registers but its token: where the
// member is, how it is verified, who the controller is there, and the
// Secret's bound on its exports.
func fingerprint(rc *rest.Config, s *corev1.Secret) [sha256.Size]byte {
	bound, bounded := s.Annotations[api.AnnotationExportNamespaces]
	im := rc.Impersonate
	h := sha256.New()
	for _, v := range []string{
		rc.Host, rc.APIPath, rc.ServerName, fmt.Sprint(rc.Insecure, rc.DisableCompression), string(rc.CAData), string(rc.CertData), string(rc.KeyData),
		rc.Username, rc.Password, im.UserName, im.UID, strings.Join(im.Groups, ","), fmt.Sprint(im.Extra), fmt.Sprint(bounded, bound),
	} {
		fmt.Fprintf(h, "%d:%s;", len(v), v)
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// rotate takes the new token of m, made of Secret s, up in the member
// registered from s, when that is all that changed and the member is
// healthy, and its API server takes it; it reports whether the change is
// handled (a token refused leaves the member as it is). The caller holds
// decide.
func (r *Registry) rotate(s *corev1.Secret, m *Member) bool {
	cur := r.get(m.Name)
	if cur == nil || cur.secret != key(s) || cur.token == nil || m.token == nil || cur.fingerprint != m.fingerprint || !cur.Healthy() {
		return false
	}
	token := *m.token.token.Load()
	if token != *cur.token.token.Load() {
		// m holds the new token: a working member is replaced only by one
		// that works (candidate.go).
		if err := accepts(m); err != nil {
			r.refuse(s, fmt.Errorf("%s: the member's API server does not take its new token (%w); %s goes on with the token of the Secret's resourceVersion %s", sourceOf(s), err, cur.Name, cur.secretRV))
			return true
		}
		klog.InfoS("Member token rotated in place", "cluster", cur.Name, "source", cur.Source, "expires", expiresOrUnknown(m.credential.Expires))
	}
	cur.token.set(token)
	cur.secretRV, cur.credential = s.ResourceVersion, m.credential
	r.unreport(sourceOf(s))
	r.registered(cur)
	return true
}
