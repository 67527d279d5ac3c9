package labtest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsapi "github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// The objects lab tests run a workload and its multi-cluster service with:
// pods labelled app=<name> with one container port "http" (PodPort), and a
// Service of the same name with port "http" PodPort: targetPort and port
// are one number, so that answers of pod addresses are right for it.

// Workload applies, in cluster's namespace ns, a Deployment of replicas
// pods and a Service, both named name; headless makes the Service headless.
func (l *Lab) Workload(t testing.TB, cluster, ns, name string, replicas int32, headless bool) {
	t.Helper()
	l.Apply(t, cluster, Deployment(ns, name, replicas), Service(ns, name, headless))
}

// Deployment runs replicas pods of app name; kwok makes them Running and
// Ready, with addresses from the cluster's pod CIDR.
func Deployment(ns, name string, replicas int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: appLabels(name)},
			Template: podTemplate(name),
		},
	}
}

// StatefulSet runs replicas pods of app name named <name>-0, <name>-1, …,
// whose hostnames the EndpointSlices of the headless Service name carry.
func StatefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: appLabels(name)},
			Template:            podTemplate(name),
		},
	}
}

func appLabels(name string) map[string]string { return map[string]string{"app": name} }

func podTemplate(name string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: appLabels(name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "serve",
			Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: PodPort}},
		}}},
	}
}

// Service selects the pods of app name, port "http" PodPort to their port
// "http", the same number.
func Service(ns, name string, headless bool) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: appLabels(name),
			Ports: []corev1.ServicePort{{
				Name: "http", Port: PodPort, TargetPort: intstr.FromString("http"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	if headless {
		s.Spec.ClusterIP = corev1.ClusterIPNone
	}
	return s
}

// MultiClusterService asks the hub for service name of namespace ns from
// the provision clusters to the consumption clusters (nil: all).
func MultiClusterService(ns, name string, strategy api.Strategy, provision, consumption []mcsapi.ClusterName) *mcsapi.MultiClusterService {
	return &mcsapi.MultiClusterService{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: mcsapi.MultiClusterServiceSpec{
			Types: []mcsapi.ExposureType{mcsapi.CrossCluster}, Strategy: strategy,
			ServiceProvisionClusters: provision, ServiceConsumptionClusters: consumption,
		},
	}
}

// ServiceExport exports service name of namespace ns (the MCS API).
func ServiceExport(ns, name string) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
}

// ReadyPodIPs returns the sorted addresses of cluster's pods of app name
// once there are exactly want of them, each Running and Ready.
func (l *Lab) ReadyPodIPs(ctx context.Context, t testing.TB, cluster, ns, name string, want int) ([]string, error) {
	pods, err := l.Client(t, cluster).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + name})
	if err != nil {
		return nil, err
	}
	if len(pods.Items) != want {
		return nil, fmt.Errorf("%s: %d pods of %s, want %d", cluster, len(pods.Items), name, want)
	}
	var ips []string
	for _, pod := range pods.Items {
		if pod.Status.Phase != corev1.PodRunning || !PodReady(&pod) || pod.Status.PodIP == "" {
			return nil, fmt.Errorf("%s: pod %s: phase %s, ready %t, IP %q", cluster, pod.Name, pod.Status.Phase, PodReady(&pod), pod.Status.PodIP)
		}
		ips = append(ips, pod.Status.PodIP)
	}
	slices.Sort(ips)
	return ips, nil
}

// PodReady reports the pod's Ready condition.
func PodReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
