package credentials

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// JWT is a token with the claims given, signed by nobody: the controller
// never verifies a signature.
func JWT(claims map[string]any) string {
	js, err := json.Marshal(claims)
	if err != nil {
		panic(err)
	}
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(js) + ".c2lnbmF0dXJl"
}

func TestOf(t *testing.T) {
	exp := time.Date(2026, 12, 27, 0, 0, 0, 0, time.UTC)
	annotated := map[string]string{api.AnnotationCredentialExpires: "2026-12-20T00:00:00Z"}
	for _, tc := range []struct {
		name        string
		token       string
		annotations map[string]string
		expires     time.Time
		notRenewed  string // "" when renewed
	}{
		{"the controller's token", JWT(map[string]any{"sub": Subject, "exp": exp.Unix()}), nil, exp, ""},
		{"its exp rules over the annotation", JWT(map[string]any{"sub": Subject, "exp": exp.Unix()}), annotated, exp, ""},
		{"no exp: the annotation", JWT(map[string]any{"sub": Subject}), annotated, exp.Add(-7 * 24 * time.Hour), ""},
		{"no exp nor annotation", JWT(map[string]any{"sub": Subject}), nil, time.Time{}, "expiry is unknown"},
		{"another account", JWT(map[string]any{"sub": "system:serviceaccount:kube-system:admin", "exp": exp.Unix()}), nil, exp, `"system:serviceaccount:kube-system:admin", not of system:serviceaccount:mcs-system:mcs-member`},
		{"the hub controller's account", JWT(map[string]any{"sub": "system:serviceaccount:mcs-system:mcs-controller", "exp": exp.Unix()}), nil, exp, "before it was named mcs-member: run kubectl mcs join for this member again"},
		{"an opaque token, annotated", "abcdef.0123456789abcdef", annotated, exp.Add(-7 * 24 * time.Hour), "not a JWT"},
		{"an opaque token", "abcdef.0123456789abcdef", nil, time.Time{}, "not a JWT"},
		{"a bad annotation", JWT(map[string]any{"sub": Subject}), map[string]string{api.AnnotationCredentialExpires: "soon"}, time.Time{}, "annotation " + api.AnnotationCredentialExpires},
		{"payload not base64", "a.%%%.c", nil, time.Time{}, "not base64url"},
		{"payload not claims", "a." + base64.RawURLEncoding.EncodeToString([]byte("[1]")) + ".c", nil, time.Time{}, "not a JSON object of claims"},
		{"exp not a number", JWT(map[string]any{"sub": Subject, "exp": "tomorrow"}), nil, time.Time{}, "not a JSON object of claims"},
		{"exp out of range", JWT(map[string]any{"sub": Subject, "exp": 1e300}), nil, time.Time{}, "is not a time"},
		{"iat out of range", JWT(map[string]any{"sub": Subject, "exp": exp.Unix(), "iat": -1}), nil, time.Time{}, "iat claim -1 is not a time"},
		{"too long", strings.Repeat("a", MaxToken+1), nil, time.Time{}, "more than the 16384"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Of(tc.token, nil, tc.annotations)
			if !c.Expires.Equal(tc.expires) {
				t.Errorf("expires %s, want %s", c.Expires, tc.expires)
			}
			switch {
			case tc.notRenewed == "" && c.NotRenewed != nil:
				t.Errorf("not renewed: %v, want renewed", c.NotRenewed)
			case tc.notRenewed != "" && (c.NotRenewed == nil || !strings.Contains(c.NotRenewed.Error(), tc.notRenewed)):
				t.Errorf("not renewed: %v, want %q", c.NotRenewed, tc.notRenewed)
			}
		})
	}
}

// A token is due for renewal --renew-credentials-before ahead of its
// expiry, unless that lead takes more than nine tenths of its lifetime:
// then once two thirds of it have passed. A token a cloud caps at a day is
// renewed after 16 hours, not the moment it is issued; a lead the token
// has room for is kept.
func TestRenewAt(t *testing.T) {
	issued := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name             string
		claims           map[string]any
		before           time.Duration // 0: DefaultRenewBefore
		renewAt, overdue time.Time
	}{
		{"30 days, as join asks", map[string]any{"iat": issued.Unix(), "exp": issued.Add(30 * day).Unix()}, 0,
			issued.Add(23 * day), issued.Add(23*day + 84*time.Hour)},
		{"capped at 24 hours (EKS)", map[string]any{"iat": issued.Unix(), "exp": issued.Add(day).Unix()}, 0,
			issued.Add(16 * time.Hour), issued.Add(20 * time.Hour)},
		{"capped at 48 hours (GKE)", map[string]any{"iat": issued.Unix(), "exp": issued.Add(2 * day).Unix()}, 0,
			issued.Add(32 * time.Hour), issued.Add(40 * time.Hour)},
		{"10 minutes renewed 9 ahead: the lead kept", map[string]any{"iat": issued.Unix(), "exp": issued.Add(10 * time.Minute).Unix()}, 9 * time.Minute,
			issued.Add(time.Minute), issued.Add(5*time.Minute + 30*time.Second)},
		{"no iat: the lead alone", map[string]any{"exp": issued.Add(day).Unix()}, 0,
			issued.Add(-6 * day), issued.Add(-2*day - 12*time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.claims["sub"] = Subject
			c := Of(JWT(tc.claims), nil, nil)
			before := cmp.Or(tc.before, DefaultRenewBefore)
			if got := c.RenewAt(before); !got.Equal(tc.renewAt) {
				t.Errorf("renewed at %s, want %s", got, tc.renewAt)
			}
			if c.Overdue(before, tc.overdue) {
				t.Errorf("overdue at %s already", tc.overdue)
			}
			if !c.Overdue(before, tc.overdue.Add(time.Second)) {
				t.Errorf("not overdue a second after %s", tc.overdue)
			}
		})
	}
}

func TestOfCertificate(t *testing.T) {
	if c := Of("", []byte("not PEM"), nil); c.NotRenewed == nil || !strings.Contains(c.NotRenewed.Error(), "no PEM certificate") {
		t.Errorf("a bad certificate: %v", c.NotRenewed)
	}
	if c := Of("", nil, nil); c.NotRenewed == nil || !c.Expires.IsZero() {
		t.Errorf("no credentials: %+v", c)
	}
}

// FuzzParseToken: whatever a Secret holds, parsing it ends with claims or
// an error, never a panic.
func FuzzParseToken(f *testing.F) {
	f.Add(JWT(map[string]any{"sub": Subject, "exp": 1790000000}))
	f.Add("a.b.c")
	f.Add("a." + base64.RawURLEncoding.EncodeToString([]byte(`{"exp":-1}`)) + ".c")
	f.Fuzz(func(t *testing.T, token string) {
		c, err := ParseToken(token)
		if err == nil && !c.Expires.IsZero() && c.Expires.Unix() <= 0 {
			t.Errorf("exp %s accepted", c.Expires)
		}
	})
}
