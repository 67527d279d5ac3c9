package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// What kubectl mcs verify deploys, and how it takes it all back. Every
// object it makes carries verifyLabel, and cleanup deletes by that label
// in every namespace: what an interrupted run left behind, the next run
// removes first.

// verifyLabel marks everything verify makes (a Namespace only when verify
// made it: an existing one is used and kept).
const verifyLabel, verifyManager = api.LabelManagedBy, "kubectl-mcs-verify"

// component tells verify's server pods from its client pods.
const component = "app.kubernetes.io/component"

// verifyRun is one run of verify against a fleet.
type verifyRun struct {
	namespace            string
	hub                  kubernetes.Interface
	hubMCS               mcsclientset.Interface
	members              map[string]*verifyMember
	providers, consumers []string
	serverImage          string
	clientImage          string
	timeout              time.Duration // how long a wait, or a probe, may take
	poll                 time.Duration // between two tries
	exec                 execFunc
}

// verifyMember is one member's clients.
type verifyMember struct {
	kube kubernetes.Interface
	mcs  mcsclient.Interface
}

func verifySelector(more ...string) metav1.ListOptions {
	return metav1.ListOptions{LabelSelector: strings.Join(append([]string{verifyLabel + "=" + verifyManager}, more...), ",")}
}

func verifyMeta(ns, name string, labels ...string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{verifyLabel: verifyManager}}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Labels[labels[i]] = labels[i+1]
	}
	return m
}

// deploy makes the namespace wherever it is missing, the two
// MultiClusterServices on the hub, each provider's server, Services and
// ServiceExport, and each consumer's client.
func (r *verifyRun) deploy(ctx context.Context) error {
	hubNS := verifyMeta("", r.namespace, api.LabelExports, api.ExportsAllowed)
	if err := ensureNamespace(ctx, r.hub, hubNS); err != nil {
		return fmt.Errorf("the hub: %w", err)
	}
	for svc, strategy := range map[string]api.Strategy{verifyLocal: api.LocalFirst, verifyHeadless: api.RemoteAndLocal} {
		if _, err := r.hubMCS.McsV1alpha1().MultiClusterServices(r.namespace).Create(ctx, r.multiClusterService(svc, strategy), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("the hub: MultiClusterService %s/%s: %w", r.namespace, svc, err)
		}
	}
	for _, c := range slices.Compact(slices.Sorted(slices.Values(slices.Concat(r.providers, r.consumers)))) {
		if err := r.deployIn(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
	}
	return nil
}

func (r *verifyRun) deployIn(ctx context.Context, c string) error {
	m := r.members[c]
	if err := ensureNamespace(ctx, m.kube, verifyMeta("", r.namespace)); err != nil {
		return err
	}
	if slices.Contains(r.providers, c) {
		if _, err := m.kube.AppsV1().StatefulSets(r.namespace).Create(ctx, r.server(c), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("StatefulSet %s: %w", verifyServer, err)
		}
		for _, s := range []string{verifyExported, verifyLocal, verifyHeadless} {
			if _, err := m.kube.CoreV1().Services(r.namespace).Create(ctx, r.service(s), metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("Service %s: %w", s, err)
			}
		}
		export := &mcsv1b1.ServiceExport{ObjectMeta: verifyMeta(r.namespace, verifyExported)}
		if _, err := m.mcs.MulticlusterV1beta1().ServiceExports(r.namespace).Create(ctx, export, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ServiceExport %s: %w", verifyExported, err)
		}
	}
	if slices.Contains(r.consumers, c) {
		if _, err := m.kube.CoreV1().Pods(r.namespace).Create(ctx, r.client(), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("Pod %s: %w", verifyClient, err)
		}
	}
	return nil
}

// ensureNamespace makes ns unless it exists: one of the user's is used as
// it is, and kept.
func ensureNamespace(ctx context.Context, kube kubernetes.Interface, ns metav1.ObjectMeta) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: ns}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("Namespace %s: %w", ns.Name, err)
	}
	return nil
}

func (r *verifyRun) multiClusterService(name string, strategy api.Strategy) *v1alpha1.MultiClusterService {
	names := func(cs []string) []v1alpha1.ClusterName {
		var out []v1alpha1.ClusterName
		for _, c := range cs {
			out = append(out, v1alpha1.ClusterName(c))
		}
		return out
	}
	return &v1alpha1.MultiClusterService{
		ObjectMeta: verifyMeta(r.namespace, name),
		Spec: v1alpha1.MultiClusterServiceSpec{
			Types: []v1alpha1.ExposureType{v1alpha1.CrossCluster}, Strategy: strategy,
			ServiceProvisionClusters: names(r.providers), ServiceConsumptionClusters: names(r.consumers),
		},
	}
}

// server is the StatefulSet of one pod, mcs-verify-0, whose socat answers
// each connection with the pod's cluster and name: "mcs-verify <cluster>
// <pod>".
func (r *verifyRun) server(cluster string) *appsv1.StatefulSet {
	labels := map[string]string{verifyLabel: verifyManager, component: "server"}
	return &appsv1.StatefulSet{
		ObjectMeta: verifyMeta(r.namespace, verifyServer, component, "server"),
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](1),
			ServiceName:         verifyHeadless,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					EnableServiceLinks:            ptr.To(false),
					Containers: []corev1.Container{{
						Name: "server", Image: r.serverImage, Command: []string{"socat"},
						Args: []string{fmt.Sprintf("TCP-LISTEN:%d,fork,reuseaddr", verifyPort), "SYSTEM:echo mcs-verify $(CLUSTER) $(POD_NAME)"},
						Env: []corev1.EnvVar{
							{Name: "CLUSTER", Value: cluster},
							{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
						},
						Ports:          []corev1.ContainerPort{{Name: verifyPortName, ContainerPort: verifyPort}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(verifyPort)}}, PeriodSeconds: 2},
					}},
				},
			},
		},
	}
}

func (r *verifyRun) service(name string) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: verifyMeta(r.namespace, name),
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{verifyLabel: verifyManager, component: "server"},
			Ports:    []corev1.ServicePort{{Name: verifyPortName, Port: verifyPort, TargetPort: intstr.FromString(verifyPortName), Protocol: corev1.ProtocolTCP}},
		},
	}
	if name == verifyHeadless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

// client is the pod whose dig and nc ask the consumer's cluster DNS and
// connect through its kube-proxy.
func (r *verifyRun) client() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: verifyMeta(r.namespace, verifyClient, component, "client"),
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "client", Image: r.clientImage,
				Command: []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while :; do sleep 1; done"},
			}},
		},
	}
}

// observe waits for each provider's server and each consumer's client to
// be ready and for each consumer's imports, each within the run's timeout,
// and reads what the plan needs; each wait is a check.
func (r *verifyRun) observe(ctx context.Context) (*observed, []VerifyCheck) {
	o := &observed{namespace: r.namespace, providers: r.providers, consumers: r.consumers,
		servers: map[string][]string{}, localVIPs: map[string][]string{}, imports: map[string]map[string][]string{}, answerVIPs: map[string]bool{}}
	var checks []VerifyCheck
	for _, p := range r.providers {
		ips, err := r.ready(ctx, p, "server", 1)
		o.servers[p] = ips
		checks = append(checks, stepCheck(p, "server ready", r.namespace+"/"+serverPod, strings.Join(ips, ", "), err))
		if svc, err := r.members[p].kube.CoreV1().Services(r.namespace).Get(ctx, verifyLocal, metav1.GetOptions{}); err == nil {
			o.localVIPs[p] = svc.Spec.ClusterIPs
		}
	}
	for _, c := range r.consumers {
		_, err := r.ready(ctx, c, "client", 1)
		checks = append(checks, stepCheck(c, "client ready", r.namespace+"/"+verifyClient, "", err))
		o.imports[c] = map[string][]string{}
		for _, svc := range []string{verifyExported, verifyLocal, verifyHeadless} {
			ips, err := r.imported(ctx, c, svc)
			if err == nil {
				o.imports[c][svc] = ips
			}
			checks = append(checks, stepCheck(c, "imported", r.namespace+"/"+svc, strings.Join(ips, ", "), err))
		}
		o.answerVIPs[c] = answersVIP(ctx, r.members[c].kube)
	}
	return o, checks
}

// ready waits until cluster has want of verify's pods of role, each
// Running and Ready, and returns their addresses.
func (r *verifyRun) ready(ctx context.Context, cluster, role string, want int) ([]string, error) {
	var ips []string
	var last error
	err := wait.PollUntilContextTimeout(ctx, r.poll, r.timeout, true, func(ctx context.Context) (bool, error) {
		got, err := r.readyPods(ctx, cluster, role, want)
		ips, last = got, keep(ctx, last, err)
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("not ready within %s: %w (kubectl --context %s -n %s get events says why)", r.timeout, cmp.Or(last, err), cluster, r.namespace)
	}
	return ips, nil
}

// readyPods are the addresses of cluster's pods of role, or why they are
// not want pods, each Running and Ready.
func (r *verifyRun) readyPods(ctx context.Context, cluster, role string, want int) ([]string, error) {
	pods, err := r.members[cluster].kube.CoreV1().Pods(r.namespace).List(ctx, verifySelector(component+"="+role))
	if err != nil {
		return nil, err
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning || !podReady(&p) || p.Status.PodIP == "" {
			return nil, fmt.Errorf("pod %s: %s, not ready", p.Name, cmp.Or(string(p.Status.Phase), "pending"))
		}
		for _, ip := range p.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
	}
	if len(pods.Items) != want {
		return nil, fmt.Errorf("%d pods, want %d", len(pods.Items), want)
	}
	return ips, nil
}

// keep is the error a try ended with, unless the timeout may have cut it
// short (it ended within a second of the deadline: a client's rate limiter
// and dialer give up before the context is done) and an earlier, whole try
// said more.
func keep(ctx context.Context, last, err error) error {
	deadline, ok := ctx.Deadline()
	if err != nil && last != nil && (ctx.Err() != nil || ok && time.Until(deadline) < time.Second) {
		return last
	}
	return err
}

// gone waits until cluster has no server pod left.
func (r *verifyRun) gone(ctx context.Context, cluster string) error {
	err := wait.PollUntilContextTimeout(ctx, r.poll, r.timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := r.members[cluster].kube.CoreV1().Pods(r.namespace).List(ctx, verifySelector(component+"=server"))
		return err == nil && len(pods.Items) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("its pod is still there after %s", r.timeout)
	}
	return nil
}

// imported waits until consumer c's ServiceImport of svc is there, with
// IPs unless it is headless, and returns them.
func (r *verifyRun) imported(ctx context.Context, c, svc string) ([]string, error) {
	var ips []string
	var last error
	err := wait.PollUntilContextTimeout(ctx, r.poll, r.timeout, true, func(ctx context.Context) (bool, error) {
		imp, err := r.members[c].mcs.MulticlusterV1beta1().ServiceImports(r.namespace).Get(ctx, svc, metav1.GetOptions{})
		switch {
		case err != nil:
			last = keep(ctx, last, err)
			return false, nil
		case imp.Spec.Type != mcsv1b1.Headless && len(imp.Spec.IPs) == 0:
			last = errors.New("the ServiceImport has no IPs yet")
			return false, nil
		}
		ips = imp.Spec.IPs
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("not imported within %s: %w (kubectl mcs diagnose %s -n %s says why)", r.timeout, cmp.Or(last, err), svc, r.namespace)
	}
	return ips, nil
}

// answersVIP reads the answer option from the member's Corefile
// (kube-system/coredns): vip, the default, unless it says endpoints.
func answersVIP(ctx context.Context, kube kubernetes.Interface) bool {
	cm, err := kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		return true
	}
	o := answerRE.FindStringSubmatch(cm.Data["Corefile"])
	return o == nil || o[1] == "vip"
}

// scale sets the replicas of cluster's server.
func (r *verifyRun) scale(ctx context.Context, cluster string, replicas int) error {
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	_, err := r.members[cluster].kube.AppsV1().StatefulSets(r.namespace).Patch(ctx, verifyServer, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// collection is one kind of object verify makes in a cluster: how to list
// verify's, and delete one.
type collection struct {
	kind   string
	list   func(context.Context, metav1.ListOptions) (runtime.Object, error)
	delete func(ctx context.Context, ns, name string) error
}

// collections are the kinds verify makes in each cluster, in the order
// they are deleted: what holds others first, and namespaces last.
func (r *verifyRun) collections() map[string][]collection {
	out := map[string][]collection{"hub": {
		{"MultiClusterService",
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return r.hubMCS.McsV1alpha1().MultiClusterServices("").List(ctx, o)
			},
			func(ctx context.Context, ns, name string) error {
				return r.hubMCS.McsV1alpha1().MultiClusterServices(ns).Delete(ctx, name, metav1.DeleteOptions{})
			}},
		namespaces(r.hub),
	}}
	for name, m := range r.members {
		out[name] = []collection{
			{"ServiceExport",
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return m.mcs.MulticlusterV1beta1().ServiceExports("").List(ctx, o)
				},
				func(ctx context.Context, ns, name string) error {
					return m.mcs.MulticlusterV1beta1().ServiceExports(ns).Delete(ctx, name, metav1.DeleteOptions{})
				}},
			{"StatefulSet",
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return m.kube.AppsV1().StatefulSets("").List(ctx, o)
				},
				func(ctx context.Context, ns, name string) error {
					return m.kube.AppsV1().StatefulSets(ns).Delete(ctx, name, metav1.DeleteOptions{})
				}},
			{"Pod",
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return m.kube.CoreV1().Pods("").List(ctx, o)
				},
				func(ctx context.Context, ns, name string) error {
					return m.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
				}},
			{"Service",
				func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
					return m.kube.CoreV1().Services("").List(ctx, o)
				},
				func(ctx context.Context, ns, name string) error {
					return m.kube.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
				}},
			namespaces(m.kube),
		}
	}
	return out
}

func namespaces(kube kubernetes.Interface) collection {
	return collection{"Namespace",
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return kube.CoreV1().Namespaces().List(ctx, o)
		},
		func(ctx context.Context, _, name string) error {
			return kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
		}}
}

// cleanup deletes everything that carries verify's label in every
// cluster, and waits until it is gone: a namespace verify made goes with
// it; one of the user's stays. It returns what it could not delete, or
// what is still there when ctx ends.
func (r *verifyRun) cleanup(ctx context.Context) error {
	var errs []error
	for cluster, cs := range r.collections() {
		for _, c := range cs {
			if err := ctx.Err(); err != nil { // as a client would fail, without waiting on each request
				return fmt.Errorf("stopped: %w; verify's next run removes the rest", err)
			}
			names, err := c.names(ctx)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: listing %ss: %w", cluster, c.kind, err))
			}
			for _, n := range names {
				if err := c.delete(ctx, n.Namespace, n.Name); err != nil && !apierrors.IsNotFound(err) {
					errs = append(errs, fmt.Errorf("%s: deleting %s %s: %w", cluster, c.kind, n, err))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	var left []string
	err := wait.PollUntilContextCancel(ctx, r.poll, true, func(ctx context.Context) (bool, error) {
		left = r.leftovers(ctx)
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("still there: %s (a MultiClusterService waits for mcs-controller to drop its finalizer)", strings.Join(left, ", "))
	}
	return nil
}

// cleanupWithin is cleanup with a timeout of its own.
func (r *verifyRun) cleanupWithin(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.cleanup(ctx)
}

// leftovers are the objects of verify's label in every cluster, sorted.
func (r *verifyRun) leftovers(ctx context.Context) []string {
	var out []string
	for cluster, cs := range r.collections() {
		for _, c := range cs {
			names, err := c.names(ctx)
			if err != nil {
				out = append(out, fmt.Sprintf("%s: %ss (%v)", cluster, c.kind, err))
			}
			for _, n := range names {
				out = append(out, fmt.Sprintf("%s: %s %s", cluster, c.kind, n))
			}
		}
	}
	slices.Sort(out)
	return out
}

// names are the namespace and name of each object of verify's label.
func (c *collection) names(ctx context.Context) ([]types.NamespacedName, error) {
	list, err := c.list(ctx, verifySelector())
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var out []types.NamespacedName
	for _, item := range items {
		a, err := meta.Accessor(item)
		if err != nil {
			return nil, err
		}
		out = append(out, types.NamespacedName{Namespace: a.GetNamespace(), Name: a.GetName()})
	}
	return out, nil
}
