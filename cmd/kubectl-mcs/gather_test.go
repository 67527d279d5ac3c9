package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	inventoryfake "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned/fake"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	mcsapifake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsfake "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned/fake"
)

// Credentials a fleet holds, in the places a bundle reads from: none may
// reach the bundle.
const (
	leakedToken = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6bWNzLXN5c3RlbTptY3MtbWVtYmVyIn0.c2lnbmF0dXJlc2lnbmF0dXJl"
	leakedKey   = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKEYKEYKEYKEYKEYKEYKEYKEYKEYKEYKEYKEYKEYoAoGCCqGSM49\n-----END EC PRIVATE KEY-----\n"
	leakedCert  = "-----BEGIN CERTIFICATE-----\nMIIBCERTCERTCERTCERTCERTCERTCERTCERTCERTCERTCERTCERTCERT\n-----END CERTIFICATE-----\n"
	staticToken = "abcdef.0123456789abcdef"
)

func memberSecretWithCredentials() *corev1.Secret {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://member1.example:6443", certificate-authority-data: ` + b64(leakedCert) + `}}]
users: [{name: u, user: {token: ` + leakedToken + `, client-certificate-data: ` + b64(leakedCert) + `, client-key-data: ` + b64(leakedKey) + `}}]
contexts: [{name: m, context: {cluster: c, user: u}}]
current-context: m
`
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "member1", Namespace: "mcs-system", Labels: map[string]string{api.LabelCluster: "member1"},
			Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"data":{"kubeconfig":"` + b64(kubeconfig) + `"},"stringData":{"password":"` + staticToken + `"}}`}},
		Data: map[string][]byte{api.KeyKubeconfig: []byte(kubeconfig)},
	}
	return s
}

func pod(namespace, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main"}}}}
}

// leakingMetrics is /metrics that carries a token, as a careless label
// would: the bundle scrubs it.
func leakingMetrics(k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
	return true, response{body: "up 1\nrequest{authorization=\"Bearer " + leakedToken + "\"} 1\n"}, nil
}

// A bundle holds the hub's and every member's part, every replica's logs
// and metrics, a manifest of it all and of what could not be read, and no
// token, key or certificate, wherever the fleet keeps one.
func TestGatherHoldsNoCredentials(t *testing.T) {
	controller := map[string]string{"app.kubernetes.io/name": "mcs-controller"}
	deployment := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "mcs-controller", Labels: controller,
		Annotations: map[string]string{corev1.LastAppliedConfigAnnotation: `{"spec":{"template":{"spec":{"containers":[{"env":[{"name":"TOKEN","value":"` + staticToken + `"}]}]}}}}`}},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Args: []string{"--shards=2"}}}}}}}
	hub := k8sfake.NewClientset(memberSecretWithCredentials(), deployment,
		pod("mcs-system", "mcs-controller-a", controller), pod("mcs-system", "mcs-controller-b", controller))
	hub.PrependProxyReactor("pods", leakingMetrics)
	dns := map[string]string{"k8s-app": "kube-dns"}
	member1 := k8sfake.NewClientset(pod("kube-system", "coredns-a", dns), pod("kube-system", "coredns-b", dns),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"}, Data: map[string]string{"Corefile": ".:53 {\n    mcs {\n        cluster member1\n    }\n}\n"}})
	member1.PrependProxyReactor("pods", leakingMetrics)
	p := profile("fleet", "member1")
	p.Status.AccessProviders = []inventory.AccessProvider{{Name: "secretreader", Cluster: clientcmdv1.Cluster{Server: "https://member1.example:6443", CertificateAuthorityData: []byte(leakedCert)}}}
	g := &gatherer{hub: hub, hubMCS: mcsfake.NewSimpleClientset(), profiles: inventoryfake.NewSimpleClientset(p), namespace: "mcs-system", since: 0,
		sources: memberSources{members: []string{"member1", "member2"}, profileNamespace: "fleet"},
		connect: func(cluster string) (kubernetes.Interface, mcsclient.Interface, error) {
			if cluster == "member2" {
				return nil, nil, errors.New(`no usable kubeconfig context "member2"`)
			}
			return member1, mcsapifake.NewSimpleClientset(), nil
		}}
	var out bytes.Buffer
	m, err := g.write(t.Context(), &out)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, out.Bytes())
	for path, data := range files {
		for _, leak := range []string{leakedToken, staticToken, "BEGIN", "PRIVATE KEY", "MIIB", base64.StdEncoding.EncodeToString([]byte(leakedKey))[:24], base64.StdEncoding.EncodeToString([]byte(leakedCert))[:24]} {
			if strings.Contains(data, leak) {
				t.Errorf("%s holds %q:\n%s", path, leak, data)
			}
		}
	}
	for _, want := range []string{
		"hub/controller/deployments.yaml", "hub/controller/logs/mcs-controller-a.main.log", "hub/controller/logs/mcs-controller-b.main.log",
		"hub/controller/metrics/mcs-controller-a.txt", "hub/controller/metrics/mcs-controller-b.txt", "hub/multiclusterservices.yaml",
		"hub/member-secrets.yaml", "hub/clusterprofiles.yaml", "members/member1/serviceimports.yaml", "members/member1/imported-endpointslices.yaml",
		"members/member1/coredns/configmap.yaml", "members/member1/coredns/logs/coredns-b.main.log", "members/member1/coredns/metrics/coredns-a.txt",
		"manifest.json",
	} {
		if _, ok := files[want]; !ok {
			t.Errorf("the bundle has no %s", want)
		}
	}
	if s := files["hub/member-secrets.yaml"]; !strings.Contains(s, "https://member1.example:6443") || !strings.Contains(s, "cluster: member1") {
		t.Errorf("the member Secrets say nothing of where member1 is:\n%s", s)
	}
	if s := files["hub/clusterprofiles.yaml"]; !strings.Contains(s, "https://member1.example:6443") {
		t.Errorf("the ClusterProfiles say nothing of where member1 is:\n%s", s)
	}
	if s := files["hub/controller/deployments.yaml"]; !strings.Contains(s, "--shards=2") {
		t.Errorf("the controller's flags are not in its Deployment:\n%s", s)
	}
	var manifest Manifest
	if err := json.Unmarshal([]byte(files["manifest.json"]), &manifest); err != nil {
		t.Fatal(err)
	}
	if len(manifest.Files) != len(files)-1 || len(m.Files) != len(manifest.Files) {
		t.Errorf("the manifest lists %d files, the bundle holds %d besides it", len(manifest.Files), len(files)-1)
	}
	var unreadable []string
	for _, u := range manifest.Unreadable {
		unreadable = append(unreadable, u.What+": "+u.Error)
	}
	if got := strings.Join(unreadable, "\n"); !strings.Contains(got, `member member2: no usable kubeconfig context "member2"`) || !strings.Contains(got, "Deployment kube-system/coredns") {
		t.Errorf("the manifest's unreadable:\n%s\nwant member2's context and member1's missing CoreDNS Deployment", got)
	}
}

func untar(t *testing.T, data []byte) map[string]string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(gz)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = string(body)
	}
}
