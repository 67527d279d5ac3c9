package main

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// credentials are what clients of the lab need: the CA that signed every
// apiserver's serving certificate, and the static token of the lab's admin.
type credentials struct {
	caPEM []byte
	token string
}

// authority signs the serving certificates of the lab's apiservers, so
// that kubeconfigs verify them instead of skipping TLS verification.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// writePKI writes the lab-wide files into pkiDir: the CA certificate, the
// service account key pair and the token file, and returns the CA, which
// signs each cluster's serving certificate.
func (l *lab) writePKI() (*authority, credentials, error) {
	dir := l.pkiDir()
	ca, caPEM, err := newAuthority()
	if err != nil {
		return nil, credentials{}, err
	}
	token := rand.Text()
	// The admin is in system:masters, which RBAC allows everything: the
	// lab's components and tests all use this one identity.
	tokens := fmt.Sprintf("%s,lab-admin,lab-admin,\"system:masters\"\n", token)
	files := map[string][]byte{"ca.crt": caPEM, "tokens.csv": []byte(tokens)}
	if err := addServiceAccountKeys(files); err != nil {
		return nil, credentials{}, err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return nil, credentials{}, err
		}
	}
	return ca, credentials{caPEM: caPEM, token: token}, nil
}

func newAuthority() (*authority, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating the lab CA key: %w", err)
	}
	tmpl := certTemplate("coredns-mcs-lab-ca")
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing the lab CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return &authority{cert: cert, key: key}, pemBlock("CERTIFICATE", der), nil
}

// writeServingCert writes the apiserver's certificate and key for c, valid
// for its loopback address and for the kubernetes Service's names and IP.
func (l *lab) writeServingCert(ca *authority, c cluster) error {
	serviceIP, err := c.kubernetesServiceIP()
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("cluster %s: generating the serving key: %w", c.name, err)
	}
	tmpl := certTemplate("kube-apiserver." + c.name)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	tmpl.IPAddresses = []net.IP{net.ParseIP(c.ip), net.IP(serviceIP.AsSlice())}
	tmpl.DNSNames = []string{
		"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local",
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return fmt.Errorf("cluster %s: signing the serving certificate: %w", c.name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	dir := l.clusterDir(c)
	if err := os.WriteFile(filepath.Join(dir, "apiserver.crt"), pemBlock("CERTIFICATE", der), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "apiserver.key"), pemBlock("PRIVATE KEY", keyDER), 0o600)
}

// addServiceAccountKeys adds the RSA key pair that signs and verifies
// service account tokens, shared by every cluster's apiserver and
// controller manager.
func addServiceAccountKeys(files map[string][]byte) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("generating the service account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		return err
	}
	files["sa.key"] = pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	files["sa.pub"] = pemBlock("PUBLIC KEY", pub)
	return nil
}

func certTemplate(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(1, 0, 0),
	}
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
