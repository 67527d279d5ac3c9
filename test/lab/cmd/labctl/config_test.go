package main

import (
	"crypto/x509"
	"encoding/pem"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// newTestLab is a lab whose state lives in a temporary directory.
func newTestLab(t *testing.T) *lab {
	t.Helper()
	out := t.TempDir()
	return &lab{binDir: filepath.Join(out, "bin"), dir: filepath.Join(out, "lab")}
}

func TestClustersDoNotCollide(t *testing.T) {
	names, ips := map[string]bool{}, map[string]bool{}
	var prefixes []netip.Prefix
	var owners []string
	members := 0
	for _, c := range clusters {
		if names[c.name] {
			t.Errorf("cluster name %s twice", c.name)
		}
		names[c.name] = true
		ip, err := netip.ParseAddr(c.ip)
		if err != nil || !ip.IsLoopback() || ip == netip.MustParseAddr("127.0.0.1") {
			t.Errorf("%s: address %q must be a loopback address of its own, not 127.0.0.1", c.name, c.ip)
		}
		if ips[c.ip] {
			t.Errorf("%s: address %s twice", c.name, c.ip)
		}
		ips[c.ip] = true
		for what, cidr := range map[string]string{"pod": c.podCIDR, "service": c.serviceCIDR} {
			p, err := netip.ParsePrefix(cidr)
			if err != nil || p != p.Masked() {
				t.Errorf("%s: %s CIDR %q is not a network prefix: %v", c.name, what, cidr, err)
				continue
			}
			prefixes, owners = append(prefixes, p), append(owners, c.name+" "+what)
		}
		if c.member {
			members++
		}
	}
	for i := range prefixes {
		for j := range i {
			if prefixes[i].Overlaps(prefixes[j]) {
				t.Errorf("%s CIDR %s overlaps %s CIDR %s", owners[i], prefixes[i], owners[j], prefixes[j])
			}
		}
	}
	if clusterNamed(t, "hub").member || members != len(clusters)-1 {
		t.Errorf("want a hub that is no member and every other cluster a member")
	}
}

func clusterNamed(t *testing.T, name string) cluster {
	t.Helper()
	for _, c := range clusters {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no cluster %s", name)
	return cluster{}
}

func TestKubernetesServiceIP(t *testing.T) {
	for _, c := range clusters {
		ip, err := c.kubernetesServiceIP()
		if err != nil {
			t.Fatal(err)
		}
		p := netip.MustParsePrefix(c.serviceCIDR)
		if !p.Contains(ip) || ip != p.Addr().Next() {
			t.Errorf("%s: kubernetes Service IP %s, want the first address of %s", c.name, ip, p)
		}
	}
	bad := cluster{name: "bad", serviceCIDR: "10.0.0.0"}
	if _, err := bad.kubernetesServiceIP(); err == nil || !strings.Contains(err.Error(), "cluster bad") {
		t.Errorf("want an error naming the cluster, got %v", err)
	}
}

func TestKubeconfig(t *testing.T) {
	creds := credentials{caPEM: []byte("ca"), token: "secret"}
	cfg := kubeconfig(creds, clusters...)
	if cfg.CurrentContext != clusters[0].name {
		t.Errorf("current context %q, want %q", cfg.CurrentContext, clusters[0].name)
	}
	for _, c := range clusters {
		ctx := cfg.Contexts[c.name]
		if ctx == nil || ctx.Cluster != c.name || ctx.AuthInfo != c.name {
			t.Fatalf("%s: context %+v", c.name, ctx)
		}
		if got, want := cfg.Clusters[c.name].Server, "https://"+c.ip+":6443"; got != want {
			t.Errorf("%s: server %s, want %s", c.name, got, want)
		}
		if string(cfg.Clusters[c.name].CertificateAuthorityData) != "ca" || cfg.AuthInfos[c.name].Token != "secret" {
			t.Errorf("%s: the CA and token must be the lab's", c.name)
		}
	}
	if one := kubeconfig(creds, clusters[2]); len(one.Contexts) != 1 || one.CurrentContext != clusters[2].name {
		t.Errorf("a component's kubeconfig has its own cluster only: %+v", one.Contexts)
	}
	rc := restConfig(creds, clusters[1])
	if rc.Host != "https://"+clusters[1].ip+":6443" || rc.BearerToken != "secret" || string(rc.CAData) != "ca" {
		t.Errorf("rest config %+v", rc)
	}
}

// TestPrepare: a fresh state directory replaces the old one and holds every
// file the components and clients read.
func TestPrepare(t *testing.T) {
	l := newTestLab(t)
	stale := filepath.Join(l.dir, "member1", "stale")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	creds, err := l.prepare()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the previous lab's %s survived: %v", stale, err)
	}
	if creds.token == "" || !strings.Contains(readFile(t, l.pkiDir(), "tokens.csv"), creds.token+",lab-admin,lab-admin,\"system:masters\"") {
		t.Errorf("tokens.csv must give the token to lab-admin in system:masters")
	}
	if readFile(t, l.pkiDir(), "ca.crt") != string(creds.caPEM) {
		t.Errorf("ca.crt is not the CA of the credentials")
	}
	for _, dir := range []string{"logs", "run"} {
		if info, err := os.Stat(filepath.Join(l.dir, dir)); err != nil || !info.IsDir() {
			t.Errorf("no %s directory: %v", dir, err)
		}
	}
	all, err := clientcmd.LoadFromFile(l.kubeconfigPath())
	if err != nil {
		t.Fatal(err)
	}
	if len(all.Contexts) != len(clusters) {
		t.Errorf("kubeconfig has %d contexts, want %d", len(all.Contexts), len(clusters))
	}
	for _, c := range clusters {
		own, err := clientcmd.LoadFromFile(l.componentKubeconfig(c))
		if err != nil {
			t.Fatal(err)
		}
		if own.CurrentContext != c.name || own.AuthInfos[c.name].Token != creds.token {
			t.Errorf("%s: component kubeconfig %+v", c.name, own)
		}
		if stages := readFile(t, l.clusterDir(c), "kwok.yaml"); strings.Count(stages, "kind: Stage") != 5 {
			t.Errorf("%s: kwok.yaml has %d stages, want 5", c.name, strings.Count(stages, "kind: Stage"))
		}
	}
	// The service account key pair is one pair.
	block, _ := pem.Decode([]byte(readFile(t, l.pkiDir(), "sa.key")))
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	block, _ = pem.Decode([]byte(readFile(t, l.pkiDir(), "sa.pub")))
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(pub) {
		t.Error("sa.pub is not the public half of sa.key")
	}
}

func readFile(t *testing.T, elem ...string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(elem...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
