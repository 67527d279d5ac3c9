package labtest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/test/labnet"
)

// ClusterDNS makes coredns-mcs the cluster DNS of each member for the rest
// of the test, as docs/install.md has an operator make it on a kubeadm
// cluster: the CoreDNS objects of deploy/overlays/<member> (Deployment,
// Corefile, account and RBAC), and the kube-dns Service kubeadm makes, at
// the tenth address of the member's Service range, which the lab's kubelet
// writes into its pods' resolv.conf. The lab's kubelet runs CoreDNS's pods
// for real, bin/coredns-mcs standing in for the image (test/lab/README.md).
// It returns once kube-dns answers through the member's kube-proxy and
// every CoreDNS pod is ready, and removes the objects when the test ends.
func ClusterDNS(t testing.TB, members ...string) {
	t.Helper()
	l := Get(t)
	l.Network(t)
	l.Binary(t, "coredns-mcs")
	ips := map[string]string{}
	for _, m := range members {
		ips[m] = l.DNSServiceIP(t, m)
		objs := corednsObjects(Kustomize(t, filepath.Join(l.root, "deploy", "overlays", m)))
		svc, err := toUnstructured(kubeDNSService(ips[m]))
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, svc)
		t.Cleanup(func() { l.remove(t, m, objs) })
		for _, o := range objs {
			l.Apply(t, m, o)
		}
	}
	for _, m := range members {
		Eventually(t, 2*time.Minute, func(ctx context.Context) error { return l.dnsServes(ctx, t, m, ips[m]) })
	}
}

// corednsObjects are the objects of a member overlay that make CoreDNS:
// those in kube-system, its cluster role and binding, and its role in
// mcs-system. The rest (CRDs, mcs-controller's account) the lab has, or
// other tests install.
func corednsObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetNamespace() == "kube-system" || o.GetName() == "system:coredns" || o.GetName() == "coredns-mcs" {
			out = append(out, o)
		}
	}
	return out
}

// DNSServiceIP is the tenth address of the member's Service range, which
// kubeadm gives kube-dns.
func (l *Lab) DNSServiceIP(t testing.TB, member string) string {
	t.Helper()
	svc, err := l.Client(t, member).CoreV1().Services("default").Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kubernetes has the first address of the range.
	a := netip.MustParseAddr(svc.Spec.ClusterIP)
	for range 9 {
		a = a.Next()
	}
	return a.String()
}

func kubeDNSService(ip string) *corev1.Service {
	labels := map[string]string{"k8s-app": "kube-dns"}
	port := func(name string, p int32, proto corev1.Protocol, target string) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: p, Protocol: proto, TargetPort: intstr.FromString(target)}
	}
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns", Labels: labels,
			Annotations: map[string]string{"prometheus.io/port": "9153", "prometheus.io/scrape": "true"}},
		Spec: corev1.ServiceSpec{
			ClusterIP: ip,
			Selector:  labels,
			Ports: []corev1.ServicePort{
				port("dns", 53, corev1.ProtocolUDP, "dns"),
				port("dns-tcp", 53, corev1.ProtocolTCP, "dns-tcp"),
				port("metrics", 9153, corev1.ProtocolTCP, "metrics"),
			},
		},
	}
}

// dnsServes checks that every CoreDNS pod of member is ready and that
// kube-dns, at dnsIP, answers the kubernetes Service's name through
// kube-proxy, from the member's node.
func (l *Lab) dnsServes(ctx context.Context, t testing.TB, member, dnsIP string) error {
	if _, err := l.CoreDNSReady(ctx, t, member, "kube-system", "k8s-app=kube-dns"); err != nil {
		return err
	}
	node := labnet.Node(member)
	conn, err := node.Dial(ctx, "udp", net.JoinHostPort(dnsIP, "53"))
	if err != nil {
		return err
	}
	defer conn.Close()
	q := new(dns.Msg).SetQuestion("kubernetes.default.svc.cluster.local.", dns.TypeA)
	c := &dns.Conn{Conn: conn}
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if err := c.WriteMsg(q); err != nil {
		return err
	}
	r, err := c.ReadMsg()
	if err != nil {
		return fmt.Errorf("%s: kube-dns: %w", member, err)
	}
	if len(r.Answer) == 0 {
		return fmt.Errorf("%s: kube-dns answered %s with no address", member, dns.RcodeToString[r.Rcode])
	}
	return nil
}

// CoreDNSReady checks that the CoreDNS pods of member in ns that selector
// selects answer /ready (on 8181, which waits for the mcs and kubernetes
// plugins to sync; kwok marks pods Ready whatever runs in them), from the
// member's node, and returns how many there are; none is an error.
func (l *Lab) CoreDNSReady(ctx context.Context, t testing.TB, member, ns, selector string) (int, error) {
	pods, err := l.Client(t, member).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return 0, err
	}
	if len(pods.Items) == 0 {
		return 0, fmt.Errorf("%s: no CoreDNS pods in %s (%s)", member, ns, selector)
	}
	client := labnet.Node(member).HTTPClient(2 * time.Second)
	for _, p := range pods.Items {
		if p.Status.PodIP == "" {
			return 0, fmt.Errorf("%s: pod %s has no address", member, p.Name)
		}
		resp, err := client.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8181") + "/ready")
		if err != nil {
			return 0, fmt.Errorf("%s: pod %s: %w", member, p.Name, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("%s: pod %s: /ready: %s", member, p.Name, resp.Status)
		}
	}
	return len(pods.Items), nil
}

// remove deletes objs from cluster, waiting for the pods of a Deployment
// to go, so that the next test finds the cluster as the lab made it.
func (l *Lab) remove(t testing.TB, cluster string, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := l.clusterClients(t, cluster)
	foreground := metav1.DeletePropagationForeground
	for _, o := range objs {
		ri, err := c.resource(o)
		if err == nil {
			err = ri.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &foreground})
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("labtest: removing %s %s from %s: %v", o.GetKind(), o.GetName(), cluster, err)
		}
	}
	// The test's context has ended by now.
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := c.kube.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("labtest: CoreDNS's pods of %s are still there: %v", cluster, err)
	}
}
