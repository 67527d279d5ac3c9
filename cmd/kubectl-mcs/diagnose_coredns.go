package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// imageCheck: CoreDNS runs mcs, as its pod's metrics say: stock CoreDNS
// cannot read the mcs stanza, and a kubeadm upgrade puts its image back.
// The image's name is only a hint, for when the metrics cannot be read: a
// mirror may name coredns-mcs anything.
func imageCheck(m *memberState, run *corednsRun) Check {
	name := "CoreDNS runs mcs"
	fix := "kubectl -n kube-system set image deploy/coredns coredns=<registry>/coredns-mcs:<tag> (docs/install.md, \"3. The members\")"
	if m.coredns == nil {
		return fail(linkCoreDNS, m.cluster, name, "there is no Deployment kube-system/coredns", "install coredns-mcs with deploy/overlays/<member> (docs/install.md)")
	}
	var images []string
	for _, c := range m.coredns.Spec.Template.Spec.Containers {
		images = append(images, c.Image)
	}
	image := strings.Join(images, ", ")
	named := strings.Contains(image, "coredns-mcs")
	switch {
	case run.metricsErr == nil && runsMCS(run.metrics):
		return pass(linkCoreDNS, m.cluster, name+": pod "+run.pod.Name+" exports coredns_mcs_* metrics")
	case run.metricsErr == nil:
		return fail(linkCoreDNS, m.cluster, name, "pod "+run.pod.Name+" exports no coredns_mcs_* metrics: it does not run mcs (it runs "+image+")", fix)
	case named:
		return pass(linkCoreDNS, m.cluster, name+": its image "+image+" is named so (its metrics cannot be read)")
	}
	return unknown(linkCoreDNS, m.cluster, name, "its metrics cannot be read ("+firstLine(run.metricsErr.Error())+"), and its image "+image+" is not named coredns-mcs (a mirror may name it anything)",
		"kubectl -n kube-system logs deploy/coredns | grep plugin/mcs shows whether mcs runs")
}

// runsMCS: the metrics have mcs's families.
func runsMCS(families map[string]*dto.MetricFamily) bool {
	for n := range families {
		if strings.HasPrefix(n, "coredns_mcs_") {
			return true
		}
	}
	return false
}

// mcsClusterRE finds the mcs stanza's cluster option.
var mcsClusterRE = regexp.MustCompile(`(?m)^\s*cluster\s+(\S+)\s*$`)

// mcsStanzaRE finds the mcs plugin's line in a server block.
var mcsStanzaRE = regexp.MustCompile(`(?m)^\s*mcs(\s|$)`)

// The ClusterProperty that names the cluster when the mcs stanza does not
// (KEP-2149's About API), as plugin/mcs reads it (discover.go).
var clusterPropertyGVR = schema.GroupVersionResource{Group: "about.k8s.io", Version: "v1alpha1", Resource: "clusterproperties"}

const clusterPropertyName = "cluster.clusterset.k8s.io"

// readClusterProperty reads the ClusterProperty's spec.value when the mcs
// stanza names no cluster: mcs then takes its name from there. None (or
// its CRD not served) leaves it nil.
func (m *memberState) readClusterProperty(ctx context.Context, dyn dynamic.Interface) {
	if m.corefile == nil || !mcsStanzaRE.MatchString(*m.corefile) || mcsClusterRE.MatchString(*m.corefile) {
		return
	}
	u, err := dyn.Resource(clusterPropertyGVR).Get(ctx, clusterPropertyName, metav1.GetOptions{})
	switch {
	case notServed(err):
	case err != nil:
		m.unread["clusterproperty"] = err
	default:
		v, _, _ := unstructured.NestedString(u.Object, "spec", "value")
		m.clusterProperty = &v
	}
}

// corefileCheck: CoreDNS's Corefile runs mcs under the member's name, its
// cluster option's or, without one, the ClusterProperty's.
func corefileCheck(m *memberState) Check {
	name := "CoreDNS's Corefile has the mcs stanza for cluster " + m.cluster
	switch {
	case m.corefile == nil:
		return fail(linkCoreDNS, m.cluster, name, "there is no ConfigMap kube-system/coredns", "install coredns-mcs with deploy/overlays/<member> (docs/install.md)")
	case !mcsStanzaRE.MatchString(*m.corefile):
		return fail(linkCoreDNS, m.cluster, name, "the Corefile has no mcs stanza", "apply deploy/overlays/"+m.cluster+" (its Corefile is corefile/Corefile with cluster "+m.cluster+")")
	}
	got := mcsClusterRE.FindStringSubmatch(*m.corefile)
	if got == nil {
		return clusterPropertyCheck(m, name)
	}
	if got[1] != m.cluster {
		return fail(linkCoreDNS, m.cluster, name, "the mcs stanza says cluster "+got[1], "set `cluster "+m.cluster+"` in the mcs stanza: it must be the name the member is registered under, or its own imported endpoints count as remote")
	}
	return pass(linkCoreDNS, m.cluster, name)
}

// clusterPropertyCheck: an mcs stanza without cluster option takes the
// name from the ClusterProperty, which must name the member.
func clusterPropertyCheck(m *memberState, name string) Check {
	name += " (from ClusterProperty " + clusterPropertyName + ")"
	fix := "set `cluster " + m.cluster + "` in the mcs stanza, or the ClusterProperty's spec.value to " + m.cluster + ": it must be the name the member is registered under"
	if err, ok := m.unread["clusterproperty"]; ok {
		return unknown(linkCoreDNS, m.cluster, name, "the mcs stanza has no cluster option, and the ClusterProperty cannot be read: "+err.Error(), "")
	}
	switch {
	case m.clusterProperty == nil:
		return fail(linkCoreDNS, m.cluster, name, "the mcs stanza has no cluster option, and there is no ClusterProperty "+clusterPropertyName+" (or its CRD is not served): mcs does not start", fix)
	case *m.clusterProperty != m.cluster:
		return fail(linkCoreDNS, m.cluster, name, fmt.Sprintf("the mcs stanza has no cluster option, and ClusterProperty %s says %q", clusterPropertyName, *m.clusterProperty), fix)
	}
	return pass(linkCoreDNS, m.cluster, name)
}

// corednsPermissions are what the mcs plugin lists and watches
// (plugin/mcs/README.md, "Permissions"; deploy/member/coredns-rbac.yaml
// and the system:coredns patch grant them).
var corednsPermissions = []authorizationv1.ResourceAttributes{
	{Verb: "list", Resource: "services"}, {Verb: "watch", Resource: "services"},
	{Verb: "list", Resource: "namespaces"}, {Verb: "watch", Resource: "namespaces"},
	{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, {Verb: "watch", Group: "discovery.k8s.io", Resource: "endpointslices"},
	{Verb: "list", Group: "multicluster.x-k8s.io", Resource: "serviceimports"}, {Verb: "watch", Group: "multicluster.x-k8s.io", Resource: "serviceimports"},
	{Verb: "list", Group: "coordination.k8s.io", Resource: "leases", Namespace: api.LeaseNamespace}, {Verb: "watch", Group: "coordination.k8s.io", Resource: "leases", Namespace: api.LeaseNamespace},
}

// corednsRBACCheck: CoreDNS's ServiceAccount may list and watch what mcs
// needs, asked of the member's API server.
func corednsRBACCheck(ctx context.Context, m *memberState) Check {
	name := "CoreDNS's ServiceAccount may read what mcs watches"
	if m.coredns == nil {
		return unknown(linkCoreDNS, m.cluster, name, "there is no Deployment kube-system/coredns to take the ServiceAccount of", "")
	}
	sa := m.coredns.Spec.Template.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	denied, err := deniedOf(ctx, m.kube, "system:serviceaccount:kube-system:"+sa, corednsPermissions)
	if err != nil {
		return unknown(linkCoreDNS, m.cluster, name, "SubjectAccessReview: "+err.Error(), "")
	}
	if len(denied) > 0 {
		return fail(linkCoreDNS, m.cluster, name, "kube-system/"+sa+" is denied "+strings.Join(denied, ", "),
			"apply deploy/member's coredns-rbac.yaml and its system:coredns patch (plugin/mcs/README.md, \"Permissions\"; docs/troubleshooting.md, \"Permission errors\")")
	}
	return pass(linkCoreDNS, m.cluster, name)
}

// deniedOf asks the API server, one SubjectAccessReview each, which of
// attrs user may not do, as "verb group/resource[/subresource]".
func deniedOf(ctx context.Context, kube kubernetes.Interface, user string, attrs []authorizationv1.ResourceAttributes) ([]string, error) {
	var denied []string
	for _, attr := range attrs {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: &attr}}
		got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		if !got.Status.Allowed {
			denied = append(denied, strings.TrimSuffix(fmt.Sprintf("%s %s/%s/%s", attr.Verb, attr.Group, attr.Resource, attr.Subresource), "/"))
		}
	}
	return denied, nil
}

// corednsRun is what a CoreDNS pod says of itself, its ready plugin and
// its metrics, read through the member's API server (pods/proxy):
// diagnose need not reach the pods' network.
type corednsRun struct {
	pod                    *corev1.Pod // a Running one, a Ready one first; nil: none
	podsErr                error
	readyPort, metricsPort string
	ready                  []byte
	readyErr               error
	metrics                map[string]*dto.MetricFamily
	metricsErr             error // also when there is no pod to ask
}

// probeCoreDNS asks a CoreDNS pod for its readiness and metrics.
func probeCoreDNS(ctx context.Context, m *memberState) *corednsRun {
	run := &corednsRun{metricsErr: errors.New("no CoreDNS pod is Running")}
	if m.coredns == nil {
		return run
	}
	if run.pod, run.podsErr = corednsPod(ctx, m); run.podsErr != nil {
		run.metricsErr = run.podsErr
	}
	if run.pod == nil {
		return run
	}
	run.readyPort, run.metricsPort = corefilePorts(m.corefile)
	pods := m.kube.CoreV1().Pods(run.pod.Namespace)
	run.ready, run.readyErr = pods.ProxyGet("http", run.pod.Name, run.readyPort, "/ready", nil).DoRaw(ctx)
	body, err := pods.ProxyGet("http", run.pod.Name, run.metricsPort, "/metrics", nil).DoRaw(ctx)
	if err != nil {
		run.metricsErr = fmt.Errorf("its metrics on :%s: %s", run.metricsPort, firstLine(err.Error()))
		return run
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	run.metrics, run.metricsErr = parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if run.metricsErr != nil {
		run.metricsErr = fmt.Errorf("its metrics: %w", run.metricsErr)
	}
	return run
}

// readyChecks: a CoreDNS pod is ready and its mcs has synced.
func readyChecks(m *memberState, run *corednsRun) []Check {
	name := "CoreDNS is ready and mcs has synced"
	pod := run.pod
	switch {
	case m.coredns == nil:
		return nil // imageCheck says so
	case run.podsErr != nil:
		return []Check{unknown(linkCoreDNS, m.cluster, name, "its pods: "+run.podsErr.Error(), "")}
	case pod == nil:
		return []Check{fail(linkCoreDNS, m.cluster, name, "no CoreDNS pod is Running", "kubectl -n kube-system describe deploy/coredns")}
	case isForbidden(run.readyErr):
		return []Check{unknown(linkCoreDNS, m.cluster, name, "you may not get pods/proxy in kube-system, so its readiness cannot be read: "+run.readyErr.Error(),
			"kubectl -n kube-system get pods -l k8s-app=kube-dns shows whether the pods are Ready")}
	case run.readyErr != nil:
		return []Check{fail(linkCoreDNS, m.cluster, name, fmt.Sprintf("pod %s is not ready on :%s/ready: %s", pod.Name, run.readyPort, strings.TrimSpace(firstLine(run.readyErr.Error()+" "+string(run.ready)))),
			"kubectl -n kube-system logs "+pod.Name+" | grep plugin/mcs (docs/troubleshooting.md, \"SERVFAIL, before CoreDNS has synced\")")}
	}
	checks := []Check{pass(linkCoreDNS, m.cluster, "CoreDNS pod "+pod.Name+" is ready on :"+run.readyPort+"/ready")}
	if run.metricsErr != nil || runsMCS(run.metrics) { // without mcs's metrics, imageCheck says it does not run mcs
		checks = append(checks, syncedCheck(m, run))
	}
	return checks
}

// syncedCheck reads mcs's metrics: every informer synced, the API
// answering its requests.
func syncedCheck(m *memberState, run *corednsRun) Check {
	name := "CoreDNS's mcs has synced and reaches its API server"
	if run.metricsErr != nil {
		return unknown(linkCoreDNS, m.cluster, name, run.metricsErr.Error(), "enable the prometheus plugin in the Corefile (the shipped one has it on :9153)")
	}
	families := run.metrics
	var problems []string
	for _, metric := range families["coredns_mcs_informers_synced"].GetMetric() {
		if metric.GetGauge().GetValue() != 1 && label(metric.GetLabel(), "resource") != "serviceimports" {
			problems = append(problems, "informer "+label(metric.GetLabel(), "resource")+" has not synced")
		}
	}
	for _, metric := range families["coredns_mcs_api_status"].GetMetric() {
		if s := label(metric.GetLabel(), "status"); s != "ok" && metric.GetGauge().GetValue() == 1 {
			problems = append(problems, "its API server answers "+s)
		}
	}
	if _, ok := families["coredns_mcs_informers_synced"]; !ok {
		problems = append(problems, "it exports no coredns_mcs_informers_synced")
	}
	if len(problems) > 0 {
		return fail(linkCoreDNS, m.cluster, name, strings.Join(problems, "; "),
			"kubectl -n kube-system logs "+run.pod.Name+" | grep plugin/mcs (docs/troubleshooting.md, \"SERVFAIL, before CoreDNS has synced\", \"Permission errors\")")
	}
	return pass(linkCoreDNS, m.cluster, name)
}

// corednsPod is a Running pod of CoreDNS's Deployment, a Ready one first.
func corednsPod(ctx context.Context, m *memberState) (*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(m.coredns.Spec.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := m.kube.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, err
	}
	var running []*corev1.Pod
	for i := range pods.Items {
		if p := &pods.Items[i]; p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	slices.SortStableFunc(running, func(a, b *corev1.Pod) int { return boolOrder(podReady(b), podReady(a)) })
	if len(running) == 0 {
		return nil, nil
	}
	return running[0], nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func boolOrder(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// readyRE and prometheusRE find the plugins' addresses in a Corefile.
var (
	readyRE      = regexp.MustCompile(`(?m)^\s*ready(?:\s+(\S+))?\s*$`)
	prometheusRE = regexp.MustCompile(`(?m)^\s*prometheus(?:\s+(\S+))?\s*$`)
)

// corefilePorts are the ports of the ready plugin and of the metrics in the
// Corefile, their defaults (8181, 9153) when it does not say.
func corefilePorts(corefile *string) (ready, metrics string) {
	ready, metrics = "8181", "9153"
	if corefile == nil {
		return ready, metrics
	}
	if m := readyRE.FindStringSubmatch(*corefile); m != nil && m[1] != "" {
		ready = portOf(m[1], ready)
	}
	if m := prometheusRE.FindStringSubmatch(*corefile); m != nil && m[1] != "" {
		metrics = portOf(m[1], metrics)
	}
	return ready, metrics
}

func portOf(addr, def string) string {
	if _, p, err := net.SplitHostPort(addr); err == nil && p != "" {
		return p
	}
	return def
}

func label(labels []*dto.LabelPair, name string) string {
	for _, l := range labels {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
