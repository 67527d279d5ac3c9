package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// credentialWarning is how close to its expiry a credential mcs-controller
// does not renew is a problem (the alert MCSMemberCredentialExpiring fires
// at the same point). One it renews is a problem once half the time from
// its renewal point to its expiry has passed (credentials.Overdue, as the
// alert).
const credentialWarning = 3 * 24 * time.Hour

// CredentialReport is what the hub's Secret of a member says of the
// credentials the controller reaches it with.
type CredentialReport struct {
	Expires    string `json:"expires,omitempty"`    // RFC 3339; absent when unknown
	NotRenewed string `json:"notRenewed,omitempty"` // why mcs-controller does not renew them
	// RenewAt is when mcs-controller renews them at its default
	// --renew-credentials-before (RFC 3339); absent when it does not.
	RenewAt string `json:"renewAt,omitempty"`

	credential credentials.Credential
}

// credentialsOf reads the member Secrets' credentials, by cluster.
func credentialsOf(secrets []corev1.Secret) map[string]*CredentialReport {
	out := map[string]*CredentialReport{}
	for _, s := range secrets {
		c := credentials.OfKubeconfig(s.Data[api.KeyKubeconfig], s.Annotations)
		r := &CredentialReport{credential: c}
		if !c.Expires.IsZero() {
			r.Expires = c.Expires.UTC().Format(time.RFC3339)
		}
		if c.NotRenewed != nil {
			r.NotRenewed = c.NotRenewed.Error()
		} else {
			r.RenewAt = c.RenewAt(credentials.DefaultRenewBefore).UTC().Format(time.RFC3339)
		}
		out[s.Labels[api.LabelCluster]] = r
	}
	return out
}

// problem says what is wrong with the credentials at now: expired, or so
// close to it that renewing them has failed; "" when nothing is.
func (c *CredentialReport) problem(now time.Time) string {
	if c == nil || c.Expires == "" {
		return ""
	}
	expires, err := time.Parse(time.RFC3339, c.Expires)
	if err != nil {
		return ""
	}
	renewed := c.RenewAt != ""
	switch {
	case !expires.After(now):
		return fmt.Sprintf("its credentials expired at %s: the controller cannot reach it (docs/troubleshooting.md, \"A member's credentials expire\")", c.Expires)
	case renewed && c.credential.Overdue(credentials.DefaultRenewBefore, now):
		return fmt.Sprintf("its credentials expire at %s, in %s, and have not been renewed since they were due at %s (docs/troubleshooting.md, \"A member's credentials expire\")", c.Expires, expires.Sub(now).Round(time.Minute), c.RenewAt)
	case !renewed && expires.Sub(now) < credentialWarning:
		return fmt.Sprintf("its credentials expire at %s, in %s, and have not been renewed (docs/troubleshooting.md, \"A member's credentials expire\")", c.Expires, expires.Sub(now).Round(time.Minute))
	}
	return ""
}

// String is the report in a table's column.
func (c *CredentialReport) String() string {
	switch {
	case c == nil:
		return "-"
	case c.NotRenewed != "":
		return orDash(c.Expires) + " (not renewed)"
	}
	return c.Expires
}

// credentialCheck: the member's credentials are not about to lapse.
func credentialCheck(m *memberState, contextHint string, now time.Time) Check {
	name := "its credentials on the hub expire " + m.credentials.String()
	if p := m.credentials.problem(now); p != "" {
		return fail(linkMember, m.cluster, name, p, "see the controller's log for \"Cannot renew a member's token\", or kubectl mcs join "+m.cluster+" "+contextHint+" for a new token now")
	}
	return pass(linkMember, m.cluster, name)
}
