package main

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// status and diagnose show when each member Secret's credentials expire,
// and call them a problem once renewing them has failed for half the time
// from their renewal point to their expiry; under 3 days when they are
// not renewed. A token a cloud caps at a day, renewed an hour ago, is no
// problem.
func TestCredentialReports(t *testing.T) {
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	secret := func(cluster, kubeconfig, expires string) corev1.Secret {
		return corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{api.LabelCluster: cluster}, Annotations: map[string]string{api.AnnotationCredentialExpires: expires}},
			Data:       map[string][]byte{api.KeyKubeconfig: []byte(kubeconfig)},
		}
	}
	opaque := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://m.example}}]\nusers: [{name: u, user: {token: opaque}}]\ncontexts: [{name: m, context: {cluster: c, user: u}}]\n"
	token := func(issued, expires time.Time) string {
		claims, _ := json.Marshal(map[string]any{"sub": credentials.Subject, "iat": issued.Unix(), "exp": expires.Unix()})
		return strings.Replace(opaque, "token: opaque", "token: e30."+base64.RawURLEncoding.EncodeToString(claims)+".c2ln", 1)
	}
	reports := credentialsOf([]corev1.Secret{
		secret("capped", token(now.Add(-time.Hour), now.Add(23*time.Hour)), ""),
		secret("capped-overdue", token(now.Add(-21*time.Hour), now.Add(3*time.Hour)), ""),
		secret("fresh", opaque, "2026-12-20T00:00:00Z"),
		secret("soon", opaque, "2026-11-28T00:00:00Z"),
		secret("gone", opaque, "2026-11-26T00:00:00Z"),
		secret("broken", "{", ""),
	})
	for cluster, want := range map[string]string{
		"capped": "", "capped-overdue": "expire at 2026-11-27T03:00:00Z, in 3h0m0s, and have not been renewed since they were due at 2026-11-26T19:00:00Z",
		"fresh": "", "soon": "expire at 2026-11-28T00:00:00Z, in 24h0m0s", "gone": "expired at 2026-11-26T00:00:00Z", "broken": ""} {
		r := reports[cluster]
		if got := r.problem(now); want == "" && got != "" || !strings.Contains(got, want) {
			t.Errorf("%s: problem %q, want %q", cluster, got, want)
		}
	}
	if got := reports["fresh"].String(); got != "2026-12-20T00:00:00Z (not renewed)" {
		t.Errorf("an opaque token shows as %q, want its expiry, not renewed", got)
	}
	if got := reports["broken"].String(); got != "- (not renewed)" || !strings.Contains(reports["broken"].NotRenewed, "its kubeconfig") {
		t.Errorf("a broken kubeconfig shows as %q, %q", got, reports["broken"].NotRenewed)
	}
	var none *CredentialReport
	if none.String() != "-" || none.problem(now) != "" {
		t.Errorf("no Secret (--members) shows as %q", none.String())
	}
}
