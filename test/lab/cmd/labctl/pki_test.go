package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// TestServingCertsVerify: every apiserver's certificate chains to the lab
// CA for the names and addresses clients use, and for no other cluster's
// address; its key is the one written beside it.
func TestServingCertsVerify(t *testing.T) {
	l := newTestLab(t)
	creds, err := l.prepare()
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(creds.caPEM) {
		t.Fatal("ca.crt holds no certificate")
	}
	ca := parseCert(t, creds.caPEM)
	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("the lab CA cannot sign certificates: IsCA %v, key usage %v", ca.IsCA, ca.KeyUsage)
	}
	for _, c := range clusters {
		certPEM := readFile(t, l.clusterDir(c), "apiserver.crt")
		cert := parseCert(t, []byte(certPEM))
		serviceIP, _ := c.kubernetesServiceIP()
		names := []string{c.ip, serviceIP.String(), "localhost", "kubernetes", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
		for _, name := range names {
			opts := x509.VerifyOptions{Roots: roots, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
			if _, err := cert.Verify(opts); err != nil {
				t.Errorf("%s: does not verify for %s: %v", c.name, name, err)
			}
		}
		for _, other := range clusters {
			if other.name != c.name && cert.VerifyHostname(other.ip) == nil {
				t.Errorf("%s: certificate valid for %s's address %s", c.name, other.name, other.ip)
			}
		}
		if !slices.ContainsFunc(cert.IPAddresses, func(ip net.IP) bool { return ip.Equal(net.ParseIP(c.ip)) }) {
			t.Errorf("%s: IP SANs %v lack %s", c.name, cert.IPAddresses, c.ip)
		}
		if time.Now().Before(cert.NotBefore) || time.Now().AddDate(0, 6, 0).After(cert.NotAfter) {
			t.Errorf("%s: valid %s to %s; want valid now and for months", c.name, cert.NotBefore, cert.NotAfter)
		}
		if _, err := tls.LoadX509KeyPair(filepath.Join(l.clusterDir(c), "apiserver.crt"), filepath.Join(l.clusterDir(c), "apiserver.key")); err != nil {
			t.Errorf("%s: certificate and key do not match: %v", c.name, err)
		}
	}
}

// A certificate from another lab's CA does not verify against this one.
func TestServingCertsOfAnotherLab(t *testing.T) {
	a, b := newTestLab(t), newTestLab(t)
	credsA, err := a.prepare()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.prepare(); err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(credsA.caPEM)
	cert := parseCert(t, []byte(readFile(t, b.clusterDir(clusters[0]), "apiserver.crt")))
	if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: clusters[0].ip}); err == nil {
		t.Fatal("another lab's certificate verifies against this lab's CA")
	}
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("no PEM certificate in %q", data)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
