// Package credentials reads when the credentials in a member Secret expire,
// and whether mcs-controller renews them. What it reads is untrusted:
// whoever may write a Secret in the controller's namespace wrote it. A
// token's claims are read, never verified, and used for nothing but when
// to renew it and whether it is of the one account the controller renews;
// its size is bounded, and what does not parse is an error that says so.
package credentials

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/api"
)

const (
	// Namespace and ServiceAccount are the member account, the
	// controller's identity in every member (deploy/member), the only one
	// whose tokens it renews. It is not the hub controller's own account,
	// mcs-controller, so that a hub joined as a member hands nothing of
	// the controller's rights to its member Secret.
	Namespace      = "mcs-system"
	ServiceAccount = "mcs-member"
	// Subject is the sub claim of that account's tokens.
	Subject = "system:serviceaccount:" + Namespace + ":" + ServiceAccount
	// LegacySubject is the member account's before it had a name of its
	// own: a Secret holding one of its tokens is moved by kubectl mcs join.
	LegacySubject = "system:serviceaccount:" + Namespace + ":mcs-controller"
	// MaxToken bounds a token that is read: a ServiceAccount token takes
	// about 1 KiB.
	MaxToken = 16 << 10
	// maxKubeconfig is the API server's bound on a Secret.
	maxKubeconfig = 1 << 20
)

// Credential is what a member Secret's credentials say of themselves.
type Credential struct {
	// Expires is when they expire; zero when neither they nor the Secret
	// say.
	Expires time.Time
	// Issued is when the token was issued (its iat claim); zero when it
	// does not say.
	Issued time.Time
	// NotRenewed is nil when the controller renews them: a token of its
	// own ServiceAccount whose expiry is known. Else it says why not.
	NotRenewed error
}

// DefaultRenewBefore is how long before its expiry mcs-controller renews a
// token by default (--renew-credentials-before).
const DefaultRenewBefore = 7 * 24 * time.Hour

// RenewAt is when credentials renewed before their expiry are due: before
// ahead of it, unless before takes more than nine tenths of the token's
// lifetime; then once two thirds of the lifetime have passed. Clouds cap
// the tokens they issue (EKS at 24 hours, GKE at 48) below a lead of days,
// which would make each one due the moment it is issued.
func (c Credential) RenewAt(before time.Duration) time.Time {
	if lifetime := c.Expires.Sub(c.Issued); !c.Issued.IsZero() && lifetime > 0 && before > lifetime*9/10 {
		before = lifetime / 3
	}
	return c.Expires.Add(-before)
}

// Overdue reports whether, at now, credentials renewed before their
// expiry should have been long since: half the time between RenewAt and
// the expiry has passed (a renewal is retried within minutes).
func (c Credential) Overdue(before time.Duration, now time.Time) bool {
	due := c.RenewAt(before)
	return now.After(due.Add(c.Expires.Sub(due) / 2))
}

// Of is the credential of a Secret's kubeconfig user: its token, else its
// client certificate (PEM); annotations are the Secret's.
func Of(token string, cert []byte, annotations map[string]string) Credential {
	switch {
	case token != "":
		return ofToken(token, annotations)
	case len(cert) > 0:
		expires, err := certExpiry(cert)
		if err != nil {
			return Credential{NotRenewed: err}
		}
		return Credential{Expires: expires, NotRenewed: errors.New("it authenticates with a client certificate, which the controller does not renew: renew it yourself, or run kubectl mcs join for a token it renews")}
	}
	return Credential{NotRenewed: errors.New("its kubeconfig has no token nor client certificate: nothing to renew")}
}

// ofToken: the token's exp claim when it has one, else the Secret's
// annotation, which join writes from the member's answer.
func ofToken(token string, annotations map[string]string) Credential {
	claims, err := ParseToken(token)
	if err != nil {
		expires, aerr := annotated(annotations)
		return Credential{Expires: expires, NotRenewed: errors.Join(err, aerr)}
	}
	c := Credential{Expires: claims.Expires, Issued: claims.Issued}
	if c.Expires.IsZero() {
		c.Expires, err = annotated(annotations)
	}
	switch {
	case err != nil:
		c.NotRenewed = err
	case claims.Subject == LegacySubject:
		c.NotRenewed = fmt.Errorf("its token is of %s, the member account before it was named %s: run kubectl mcs join for this member again, which moves it (docs/operations.md, \"Moving to the member account mcs-member\")", LegacySubject, ServiceAccount)
	case claims.Subject != Subject:
		c.NotRenewed = fmt.Errorf("its token is of %q, not of %s, the account kubectl mcs join makes: only that one is renewed", claims.Subject, Subject)
	case c.Expires.IsZero():
		c.NotRenewed = fmt.Errorf("its token has no exp claim, and the Secret no annotation %s: its expiry is unknown", api.AnnotationCredentialExpires)
	}
	return c
}

// annotated is the expiry the Secret's annotation says, zero without one.
func annotated(annotations map[string]string) (time.Time, error) {
	v, ok := annotations[api.AnnotationCredentialExpires]
	if !ok {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s: %w", api.AnnotationCredentialExpires, err)
	}
	return t, nil
}

// Claims are the claims of a token the controller reads, unverified.
type Claims struct {
	Subject string
	Expires time.Time // zero without an exp claim
	Issued  time.Time // zero without an iat claim
}

// maxExp is the last second of year 9999: an exp claim past it is no time.
const maxExp = 253402300799

// ParseToken reads a JWT's claims without verifying its signature: only
// the member's API server can, and the controller asks it nothing on their
// word but a new token of the same account, which it answers only to that
// account's holder.
func ParseToken(token string) (Claims, error) {
	if len(token) > MaxToken {
		return Claims{}, fmt.Errorf("its token has %d bytes, more than the %d a ServiceAccount token takes", len(token), MaxToken)
	}
	if strings.Count(token, ".") != 2 {
		return Claims{}, errors.New("its token is not a JWT (header.payload.signature): its claims, expiry included, are unknown")
	}
	payload := strings.Split(token, ".")[1]
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(payload, "="))
	if err != nil {
		return Claims{}, fmt.Errorf("its token's payload is not base64url: %w", err)
	}
	var c struct {
		Sub string   `json:"sub"`
		Exp *float64 `json:"exp"`
		Iat *float64 `json:"iat"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return Claims{}, fmt.Errorf("its token's payload is not a JSON object of claims: %w", err)
	}
	out := Claims{Subject: c.Sub}
	if c.Exp != nil {
		if *c.Exp <= 0 || *c.Exp > maxExp {
			return Claims{}, fmt.Errorf("its token's exp claim %v is not a time", *c.Exp)
		}
		out.Expires = time.Unix(int64(*c.Exp), 0).UTC()
	}
	if c.Iat != nil {
		if *c.Iat <= 0 || *c.Iat > maxExp {
			return Claims{}, fmt.Errorf("its token's iat claim %v is not a time", *c.Iat)
		}
		out.Issued = time.Unix(int64(*c.Iat), 0).UTC()
	}
	return out, nil
}

func certExpiry(data []byte) (time.Time, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return time.Time{}, errors.New("its client-certificate-data holds no PEM certificate: its expiry is unknown")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return time.Time{}, fmt.Errorf("its client certificate: %w", err)
	}
	return cert.NotAfter.UTC(), nil
}

// OfKubeconfig is the credential of a member Secret's kubeconfig, for
// readers that did not check it as the controller does (kubectl mcs): the
// user of its current context.
func OfKubeconfig(data []byte, annotations map[string]string) Credential {
	if len(data) > maxKubeconfig {
		return Credential{NotRenewed: fmt.Errorf("its kubeconfig has %d bytes, more than the %d a Secret may hold", len(data), maxKubeconfig)}
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return Credential{NotRenewed: fmt.Errorf("its kubeconfig: %w", err)}
	}
	name := cfg.CurrentContext
	for n := range cfg.Contexts {
		if name == "" && len(cfg.Contexts) == 1 { // as the controller reads it
			name = n
		}
	}
	ctx := cfg.Contexts[name]
	if ctx == nil || cfg.AuthInfos[ctx.AuthInfo] == nil {
		return Credential{NotRenewed: fmt.Errorf("its kubeconfig's context %q has no user", name)}
	}
	u := cfg.AuthInfos[ctx.AuthInfo]
	return Of(u.Token, u.ClientCertificateData, annotations)
}
