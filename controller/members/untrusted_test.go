package members

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// kubeconfig is a member kubeconfig of one context, with extra YAML lines
// in its cluster and its user.
func kubeconfig(server, cluster, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
%s
users:
- name: u
  user:
%s
contexts:
- name: member1
  context: {cluster: c, user: u}
current-context: member1
`, server, indent(cluster), indent(user))
}

func indent(lines string) string {
	if lines == "" {
		return ""
	}
	return "    " + strings.ReplaceAll(strings.TrimSpace(lines), "\n", "\n    ")
}

func memberSecret(name, cluster string, creation int64, kubeconfig string) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "mcs-system", Labels: map[string]string{api.LabelCluster: cluster},
			CreationTimestamp: metav1.Unix(creation, 0),
		},
		Data: map[string][]byte{api.KeyKubeconfig: []byte(kubeconfig)},
	}
}

// A Secret's kubeconfig registers a member only with inline credentials:
// every feature that would run a command or read a file of the controller
// is refused, naming the field and the Secret, before anything runs.
func TestUntrustedKubeconfig(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "exec-ran")
	local := filepath.Join(dir, "controller-file")
	if err := os.WriteFile(local, []byte("secret-of-the-controller"), 0o600); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("member1", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	ca := "certificate-authority-data: " + b64(certPEM)
	const https = "https://127.0.0.1:1"
	exec := fmt.Sprintf("exec:\n  apiVersion: client.authentication.k8s.io/v1\n  interactiveMode: Never\n  command: /bin/sh\n  args: [-c, 'touch %s']", marker)
	for _, c := range []struct {
		name, kubeconfig string
		allowInsecure    bool
		want             string // in the refusal; "" accepts
	}{
		{"token", kubeconfig(https, ca, "token: abc"), false, ""},
		{"client certificate", kubeconfig(https, ca, "client-certificate-data: "+b64(certPEM)+"\nclient-key-data: "+b64(keyPEM)), false, ""},
		{"basic auth", kubeconfig(https, ca, "username: a\npassword: b"), false, ""},
		{"exec", kubeconfig(https, ca, exec), false, `users["u"].user.exec is refused`},
		{"auth-provider", kubeconfig(https, ca, "auth-provider:\n  name: oidc\n  config: {idp-issuer-url: 'https://127.0.0.1:1'}"), false, `users["u"].user.auth-provider is refused`},
		{"tokenFile", kubeconfig(https, ca, "tokenFile: "+local), false, `users["u"].user.tokenFile is refused`},
		{"client-certificate", kubeconfig(https, ca, "client-certificate: "+local+"\nclient-key-data: "+b64(keyPEM)), false, `users["u"].user.client-certificate is refused`},
		{"client-key", kubeconfig(https, ca, "client-certificate-data: "+b64(certPEM)+"\nclient-key: "+local), false, `users["u"].user.client-key is refused`},
		{"certificate-authority", kubeconfig(https, "certificate-authority: "+local, "token: abc"), false, `clusters["c"].cluster.certificate-authority is refused`},
		{"insecure", kubeconfig(https, "insecure-skip-tls-verify: true", "token: abc"), false, `clusters["c"].cluster.insecure-skip-tls-verify is refused`},
		{"insecure allowed", kubeconfig(https, "insecure-skip-tls-verify: true", "token: abc"), true, ""},
		{"http", kubeconfig("http://127.0.0.1:1", "", "token: abc"), false, `clusters["c"].cluster.server "http://127.0.0.1:1" is refused`},
		{"http allowed", kubeconfig("http://127.0.0.1:1", "", "token: abc"), true, ""},
		{"no scheme", kubeconfig("127.0.0.1:1", "", "token: abc"), false, `clusters["c"].cluster.server "127.0.0.1:1" is refused`},
		{"no scheme, a CA", kubeconfig("127.0.0.1:1", ca, "token: abc"), false, `clusters["c"].cluster.server "127.0.0.1:1" is refused`},
		{"unix socket", kubeconfig("unix:///run/k.sock", "", "token: abc"), false, `clusters["c"].cluster.server "unix:///run/k.sock" is refused`},
		{"proxy", kubeconfig(https, ca+"\nproxy-url: http://127.0.0.1:3128", "token: abc"), false, `clusters["c"].cluster.proxy-url is refused`},
		{"proxy, insecure allowed", kubeconfig(https, ca+"\nproxy-url: socks5://127.0.0.1:1080", "token: abc"), true, `clusters["c"].cluster.proxy-url is refused`},
		{"two contexts", strings.Replace(kubeconfig(https, ca, "token: abc"), "contexts:\n", "contexts:\n- name: other\n  context: {cluster: c, user: u}\n", 1), false, "has 2 contexts"},
		{"another current context", strings.Replace(kubeconfig(https, ca, "token: abc"), "current-context: member1", "current-context: other", 1), false, `current-context "other"`},
		{"too large", kubeconfig(https, ca, "token: "+strings.Repeat("a", maxKubeconfig)), false, "more than the 1048576"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := fromSecret("member1", "secret mcs-system/s", memberSecret("s", "member1", 0, c.kubeconfig), connectReal, c.allowInsecure)
			if err == nil {
				// What a probe would do: the first request runs a
				// credential plugin.
				_ = m.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(context.Background()).Error()
			}
			if _, statErr := os.Stat(marker); statErr == nil {
				t.Fatal("the exec credential plugin ran in the controller")
			}
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want == "":
			case err == nil:
				t.Fatalf("accepted, want refused with %q", c.want)
			case !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "secret mcs-system/s"):
				t.Fatalf("refused with %q, want it to name the Secret and %q", err, c.want)
			}
		})
	}
}

// A context or a Secret label that is no cluster name says how to fix it.
func TestNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "members.kubeconfig")
	kc := strings.ReplaceAll(kubeconfig("https://127.0.0.1:1", "", "token: abc"), "member1", "kubernetes-admin@kubernetes")
	kc = strings.Replace(kc, "contexts:\n", "contexts:\n- name: gke_project_zone_name\n  context: {cluster: c, user: u}\n", 1)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := NewRegistry(Options{Kubeconfig: path})
	for _, want := range []string{
		"config rename-context gke_project_zone_name gke-project-zone-name",
		"config rename-context kubernetes-admin@kubernetes kubernetes-admin-kubernetes",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewRegistry: %v, want it to say %q", err, want)
		}
	}
	_, err = fromSecret("Member_1", "secret mcs-system/s", memberSecret("s", "Member_1", 0, kc), connectReal, false)
	if want := "kubectl -n mcs-system label secret s mcs.coredns-mcs.io/cluster=member-1 --overwrite"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("fromSecret: %v, want it to say %q", err, want)
	}
}

// Whatever a Secret's kubeconfig holds, reading it never panics, and what
// it registers with runs no command, reads no file of the controller, goes
// through no proxy, and speaks https to its member.
func FuzzUntrustedConfig(f *testing.F) {
	for _, seed := range []string{
		kubeconfig("https://member1:6443", "", "token: abc"),
		kubeconfig("https://member1:6443", "certificate-authority: /etc/ca.crt", "token: abc"),
		kubeconfig("https://member1:6443", "proxy-url: http://proxy:3128", "token: abc"),
		kubeconfig("10.0.0.1:6443", "", "token: abc"),
		kubeconfig("https://member1:6443", "", "tokenFile: /var/run/token"),
		kubeconfig("https://member1:6443", "", "exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}"),
		kubeconfig("https://member1:6443", "", "auth-provider: {name: gcp}"),
		kubeconfig("https://member1:6443", "", "client-certificate: /c\nclient-key: /k"),
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rc, err := untrustedConfig(data, false)
		if err != nil {
			return
		}
		switch {
		case rc.ExecProvider != nil || rc.AuthProvider != nil:
			t.Errorf("a plugin would run: exec %v, auth-provider %v", rc.ExecProvider, rc.AuthProvider)
		case rc.BearerTokenFile != "" || rc.CAFile != "" || rc.CertFile != "" || rc.KeyFile != "":
			t.Errorf("a file would be read: token %q, CA %q, cert %q, key %q", rc.BearerTokenFile, rc.CAFile, rc.CertFile, rc.KeyFile)
		case rc.Proxy != nil:
			t.Error("the member would be reached through a proxy")
		case !strings.HasPrefix(rc.Host, "https://") || rc.Insecure:
			t.Errorf("the member %q would be reached without verified TLS (insecure %v)", rc.Host, rc.Insecure)
		}
	})
}
