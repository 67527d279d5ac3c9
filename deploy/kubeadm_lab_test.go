//go:build lab

package deploy_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// kubeadm re-applies its CoreDNS add-on at every `kubeadm upgrade apply`
// (and `upgrade node` on the last control-plane node). This runs that
// phase, kubeadm's own (`kubeadm upgrade apply phase addon coredns`,
// built from the lab's Kubernetes), against a member where the member
// overlay is installed, and sees what docs/install.md ("Upgrading the
// members' Kubernetes") says:
//
//   - with the add-on on and the image named by a digest (as make
//     pin-images names it), or by a tag kubeadm reads as a CoreDNS version,
//     the phase puts the stock image back under the Corefile with the mcs
//     stanza, which stock CoreDNS refuses;
//   - with the add-on on and any other tag (the overlay's), it stops, as
//     it cannot tell which CoreDNS version runs, and changes nothing;
//   - with `dns.disabled: true` in the cluster's ClusterConfiguration, the
//     page's fix, it skips CoreDNS whatever the image.
func TestKubeadmUpgradeKeepsCoreDNS(t *testing.T) {
	const member = "member3"
	lab := labtest.Get(t)
	kube := lab.Client(t, member)
	// kubeadm takes this machine for the control-plane node it runs on.
	node, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	node = strings.ToLower(node)
	t.Cleanup(keepCoreDNS(t, lab.Dynamic(t, member), node))
	controlPlane(t, kube, node)
	a := newApplier(t, member)
	for _, u := range render(t, "overlays/member2") {
		if u.GetNamespace() == "kube-system" && (u.GetKind() == "Deployment" || u.GetKind() == "ConfigMap") {
			if err := a.apply(t.Context(), u, false); err != nil {
				t.Fatal(err)
			}
		}
	}
	overlay := coreDNS(t, kube).Spec.Template.Spec.Containers[0].Image
	repo, _, _ := strings.Cut(overlay, ":")
	kubeconfig := lab.KubeconfigOf(t, member)
	for _, tc := range []struct {
		image, want string // want: "stock", "refused" or "skipped"
		dnsDisabled bool
	}{
		{image: repo + ":v1.14.2", want: "stock"},
		{image: repo + "@sha256:" + strings.Repeat("0", 64), want: "stock"},
		{image: overlay, want: "refused"},
		{image: repo + "@sha256:" + strings.Repeat("0", 64), want: "skipped", dnsDisabled: true},
	} {
		setImage(t, kube, tc.image)
		setClusterConfiguration(t, kube, tc.dnsDisabled)
		out, err := addonPhase(t, kubeconfig)
		image := coreDNS(t, kube).Spec.Template.Spec.Containers[0].Image
		switch {
		case tc.want == "stock" && (err != nil || !strings.HasPrefix(image, "registry.k8s.io/coredns/coredns:")):
			t.Errorf("%s: kubeadm's phase left %s (%v), want its stock image back, the failure the page warns of:\n%s", tc.image, image, err, out)
		case tc.want == "refused" && (err == nil || !strings.Contains(out, "not supported") || image != tc.image):
			t.Errorf("%s: kubeadm's phase left %s (%v), want it to stop, changing nothing:\n%s", tc.image, image, err, out)
		case tc.want == "skipped" && (err != nil || !strings.Contains(out, "The addon is disabled") || image != tc.image):
			t.Errorf("%s with dns.disabled: kubeadm's phase left %s (%v), want it skipped:\n%s", tc.image, image, err, out)
		}
		if !strings.Contains(corefile(t, kube), "mcs ") {
			t.Fatalf("%s: kubeadm's phase replaced the Corefile; the page says it keeps one that was changed", tc.image)
		}
	}
}

func setImage(t *testing.T, kube kubernetes.Interface, image string) {
	t.Helper()
	// kube-controller-manager writes the Deployment's status meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := coreDNS(t, kube)
		d.Spec.Template.Spec.Containers[0].Image = image
		_, err := kube.AppsV1().Deployments("kube-system").Update(t.Context(), d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addonPhase runs kubeadm's CoreDNS add-on phase of `upgrade apply`.
func addonPhase(t *testing.T, kubeconfig string) (string, error) {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "_output", "bin", "kubeadm"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "upgrade", "apply", "phase", "addon", "coredns", "v1.36.3", "--kubeconfig", kubeconfig).CombinedOutput()
	return string(out), err
}

// setClusterConfiguration writes the kubeadm-config ConfigMap kubeadm reads
// its ClusterConfiguration from, with the CoreDNS add-on on or off.
func setClusterConfiguration(t *testing.T, kube kubernetes.Interface, dnsDisabled bool) {
	t.Helper()
	// kubeadm gives kube-dns the tenth address of the Service range.
	cidr, err := kube.NetworkingV1().ServiceCIDRs().Get(t.Context(), "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.36.3\nnetworking:\n  dnsDomain: cluster.local\n  serviceSubnet: " + cidr.Spec.CIDRs[0] + "\n"
	if dnsDisabled {
		cfg += "dns:\n  disabled: true\n"
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubeadm-config"}, Data: map[string]string{"ClusterConfiguration": cfg}}
	_, err = kube.CoreV1().ConfigMaps("kube-system").Update(t.Context(), cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = kube.CoreV1().ConfigMaps("kube-system").Create(t.Context(), cm, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func coreDNS(t *testing.T, kube kubernetes.Interface) *appsv1.Deployment {
	t.Helper()
	d, err := kube.AppsV1().Deployments("kube-system").Get(t.Context(), "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func corefile(t *testing.T, kube kubernetes.Interface) string {
	t.Helper()
	cm, err := kube.CoreV1().ConfigMaps("kube-system").Get(t.Context(), "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["Corefile"]
}

// kubeadmObject is one object kubeadm's phase reads or writes.
type kubeadmObject struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// kubeadmObjects are what kubeadm's CoreDNS phase writes, and what the
// test makes for it to read (controlPlane).
func kubeadmObjects(node string) []kubeadmObject {
	v1 := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: resource}
	}
	rbac := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: resource}
	}
	return []kubeadmObject{
		{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, "kube-system", "coredns"},
		{v1("configmaps"), "kube-system", "coredns"},
		{v1("configmaps"), "kube-system", "kubeadm-config"},
		{v1("configmaps"), "kube-system", "kubelet-config"},
		{v1("services"), "kube-system", "kube-dns"},
		{v1("serviceaccounts"), "kube-system", "coredns"},
		{v1("pods"), "kube-system", "kube-apiserver-" + node},
		{v1("nodes"), "", node},
		{rbac("clusterroles"), "", "system:coredns"},
		{rbac("clusterrolebindings"), "", "system:coredns"},
	}
}

// controlPlane makes what `kubeadm upgrade apply` reads of the control
// plane it runs on: the Node named as this machine, with its CRI socket;
// its kube-apiserver's mirror Pod, with the advertised endpoint (an
// address of the documentation range, which nothing dials: kubeadm only
// parses it, and looks for a host address of its own on loopback) and the
// version the upgrade is at; the kubelet's configuration.
func controlPlane(t *testing.T, kube kubernetes.Interface, node string) {
	t.Helper()
	ctx := t.Context()
	objs := []error{}
	_, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: node, Annotations: map[string]string{"kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"},
	}}, metav1.CreateOptions{})
	objs = append(objs, err)
	_, err = kube.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "kube-apiserver-" + node, Labels: map[string]string{"component": "kube-apiserver", "tier": "control-plane"},
			Annotations: map[string]string{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": "192.0.2.10:6443"},
		},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:v1.36.3"}}},
	}, metav1.CreateOptions{})
	objs = append(objs, err)
	_, err = kube.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kubelet-config"},
		Data:       map[string]string{"kubelet": "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"},
	}, metav1.CreateOptions{})
	objs = append(objs, err)
	for _, err := range objs {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
}

// keepCoreDNS returns what puts the objects kubeadm's phase writes back as
// they were, or deletes those that were not there: the lab is shared.
func keepCoreDNS(t *testing.T, dyn dynamic.Interface, node string) func() {
	t.Helper()
	ctx := context.Background()
	var restores []func() error
	for _, o := range kubeadmObjects(node) {
		ri := dyn.Resource(o.gvr).Namespace(o.namespace)
		was, err := ri.Get(ctx, o.name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			restores = append(restores, func() error {
				// At once: no kubelet runs the test's Pod.
				if err := ri.Delete(ctx, o.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); !apierrors.IsNotFound(err) {
					return err
				}
				return nil
			})
		case err != nil:
			t.Fatal(err)
		default:
			restores = append(restores, func() error {
				cur, err := ri.Get(ctx, o.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				was.SetResourceVersion(cur.GetResourceVersion())
				_, err = ri.Update(ctx, was, metav1.UpdateOptions{})
				return err
			})
		}
	}
	return func() {
		for _, restore := range restores {
			if err := restore(); err != nil {
				t.Errorf("restoring the lab: %v", err)
			}
		}
	}
}
