package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/tools/clientcmd"
)

// The kubeconfig join writes for the controller carries the member's
// server (or --member-server) and its CA, embedded even when the user's
// kubeconfig names a file, and the token; a context that skips verifying
// the server, or reaches it other than by https, is refused with the
// reason, as the controller would refuse it.
func TestMemberKubeconfig(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, []byte("the CA"), 0o600); err != nil {
		t.Fatal(err)
	}
	user := filepath.Join(dir, "config")
	text := `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443", certificate-authority: ` + ca + `}}
- {name: b, cluster: {server: "https://b.example:6443", insecure-skip-tls-verify: true}}
users: [{name: u, user: {token: user-token}}]
contexts:
- {name: ctx-a, context: {cluster: a, user: u}}
- {name: ctx-b, context: {cluster: b, user: u}}
current-context: ctx-a
`
	if err := os.WriteFile(user, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		context, server, wantServer, wantErr string
	}{
		{"ctx-a", "", "https://a.example:6443", ""},
		{"ctx-a", "https://10.0.0.9:6443", "https://10.0.0.9:6443", ""},
		{"ctx-b", "", "", "skips verifying its server's certificate"},
		{"ctx-a", "10.0.0.9:6443", "", `server "10.0.0.9:6443" is not https://host:port`},
		{"ctx-a", "http://10.0.0.9:6443", "", `server "http://10.0.0.9:6443" is not https://host:port`},
	} {
		flags := genericclioptions.NewConfigFlags(false)
		flags.KubeConfig, flags.Context = &user, &tc.context
		o := &joinOptions{writeOptions: writeOptions{hubOptions: hubOptions{flags: flags}}, server: tc.server}
		b, err := o.kubeconfig("member9", "the-token")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: %v, want an error saying %q", tc.context, err, tc.wantErr)
			}
			continue
		}
		cfg, err := clientcmd.Load(b)
		if err != nil {
			t.Fatal(err)
		}
		c, u := cfg.Clusters["member9"], cfg.AuthInfos[serviceAccount]
		if cfg.CurrentContext != "member9" || c.Server != tc.wantServer || string(c.CertificateAuthorityData) != "the CA" || u.Token != "the-token" {
			t.Errorf("%s: kubeconfig\n%s", tc.context, b)
		}
	}
}
