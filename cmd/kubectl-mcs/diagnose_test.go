package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
	restclient "k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// now is the diagnoses' clock: Leases are renewed relative to it.
var now = time.Date(2026, 11, 27, 3, 0, 0, 0, time.UTC)

// scene is a service foo in namespace demo, provided by member1 and
// consumed by member2, every link healthy; a test breaks one.
type scene struct {
	mcsvc                          *v1alpha1.MultiClusterService
	service1, derived2, local2     *corev1.Service
	slice1, imported2, local2Slice *discoveryv1.EndpointSlice
	export1                        *mcsv1b1.ServiceExport
	import2                        *mcsv1b1.ServiceImport
	lease2                         *coordinationv1.Lease
	coredns2                       *appsv1.Deployment
	corefile2                      *corev1.ConfigMap
	pod2                           *corev1.Pod
	denied                         map[string]bool // "user verb resource" the SARs deny
	proxyForbidden                 bool
	notReady                       string // the ready plugin's 503 body
	metrics                        string
	secrets                        map[string]*CredentialReport
	unreachable, noMCSAPI          string // a member that does not answer; one without the MCS API
	dnsServers                     map[string]string
	leaders                        []*coordinationv1.Lease    // the hub's leaders' Leases
	secret2                        *corev1.Secret             // member2's Secret on the hub
	refusal                        *corev1.Event              // the controller's on the hub
	property2                      *unstructured.Unstructured // ClusterProperty cluster.clusterset.k8s.io
	pod1                           *corev1.Pod                // foo's pod in member1
	policy1                        *networkingv1.NetworkPolicy
	nodeLocal2                     []runtime.Object // NodeLocal DNSCache's DaemonSet, ConfigMap, kube-dns
	forbidden                      []string         // "cluster verb resource" you may not (cluster "hub" too)
}

const healthyMetrics = `# TYPE coredns_mcs_informers_synced gauge
coredns_mcs_informers_synced{resource="services"} 1
coredns_mcs_informers_synced{resource="endpointslices"} 1
coredns_mcs_informers_synced{resource="serviceimports"} 1
coredns_mcs_informers_synced{resource="leases"} 1
# TYPE coredns_mcs_api_status gauge
coredns_mcs_api_status{status="ok"} 1
coredns_mcs_api_status{status="forbidden"} 0
coredns_mcs_api_status{status="unreachable"} 0
`

func healthy(t *testing.T) *scene {
	corefile, err := os.ReadFile("../../corefile/Corefile")
	if err != nil {
		t.Fatal(err)
	}
	ready := func(ips ...string) []discoveryv1.Endpoint {
		var out []discoveryv1.Endpoint
		for _, ip := range ips {
			out = append(out, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
		}
		return out
	}
	cond := func(typ, reason string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: 1}
	}
	dnsLabels := map[string]string{"k8s-app": "kube-dns"}
	return &scene{
		mcsvc: &v1alpha1.MultiClusterService{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo", Generation: 1},
			Spec:       v1alpha1.MultiClusterServiceSpec{ServiceProvisionClusters: []v1alpha1.ClusterName{"member1"}, ServiceConsumptionClusters: []v1alpha1.ClusterName{"member2"}, Strategy: api.RemoteAndLocal},
			Status: v1alpha1.MultiClusterServiceStatus{Conditions: []metav1.Condition{
				cond("ServiceApplied", "NoHubService", "True"), cond("EndpointSliceCollected", "Collected", "True"), cond("EndpointSliceApplied", "Applied", "True"),
			}},
		},
		service1: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo"}, Spec: corev1.ServiceSpec{
			ClusterIPs: []string{"10.11.0.10"}, Selector: map[string]string{"app": "foo"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}},
		slice1: &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "foo-abc", Generation: 3, Labels: map[string]string{discoveryv1.LabelServiceName: "foo"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: ready("10.10.0.5", "10.10.0.6"), Ports: httpPort,
		},
		pod1: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo-1", Labels: map[string]string{"app": "foo", "tier": "web"}}},
		export1: &mcsv1b1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo"}, Status: mcsv1b1.ServiceExportStatus{Conditions: []metav1.Condition{
			cond("Valid", "Valid", "True"), cond("Ready", "Exported", "True"), cond("Conflict", "NoConflicts", "False"),
		}}},
		import2: &mcsv1b1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo", Annotations: map[string]string{api.AnnotationStrategy: "RemoteAndLocal"}},
			Spec:       mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP, IPs: []string{"10.13.0.50"}},
			Status:     mcsv1b1.ServiceImportStatus{Clusters: []mcsv1b1.ClusterStatus{{Cluster: "member1"}}},
		},
		derived2: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "derived-foo"}, Spec: corev1.ServiceSpec{
			ClusterIPs: []string{"10.13.0.50"}, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(80)}},
		}},
		imported2: &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "imported-member1-foo-abc",
				Labels:      map[string]string{mcsv1b1.LabelServiceName: "foo", mcsv1b1.LabelSourceCluster: "member1", discoveryv1.LabelServiceName: "derived-foo"},
				Annotations: map[string]string{api.AnnotationSourceGeneration: "3"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: ready("10.10.0.5", "10.10.0.6"), Ports: httpPort,
		},
		lease2: &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "source-member1"},
			Spec:       coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-3 * time.Second)}, LeaseDurationSeconds: ptr.To(int32(20))},
		},
		coredns2: &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: dnsLabels}, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				ServiceAccountName: "coredns", Containers: []corev1.Container{{Name: "coredns", Image: "registry.example/coredns-mcs:v1"}},
			}}},
		},
		corefile2: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns"},
			Data: map[string]string{"Corefile": strings.Replace(string(corefile), "cluster member1", "cluster member2", 1)}},
		pod2: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "coredns-1", Labels: dnsLabels},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		denied:  map[string]bool{},
		metrics: healthyMetrics,
		leaders: []*coordinationv1.Lease{leaderLease("mcs-controller", "", -3*time.Second)},
		secret2: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: "member2", UID: "uid-2", ResourceVersion: "7", Labels: map[string]string{api.LabelCluster: "member2"}}},
	}
}

// httpPort is foo's port as its slices carry it: named as the Service's,
// numbered as its target.
var httpPort = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))}}

// leaderLease is a leader's Lease on the hub, of a count of shards
// ("": none said), renewed age ago (a negative duration).
func leaderLease(name, shards string, age time.Duration) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mcs-system", Name: name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("ctl-1"), RenewTime: &metav1.MicroTime{Time: now.Add(age)}, LeaseDurationSeconds: ptr.To(int32(15))},
	}
	if shards != "" {
		l.Labels = map[string]string{"mcs.coredns-mcs.io/shards": shards}
	}
	return l
}

// world reads the scene as diagnose reads members: through clientsets,
// fakes here.
func (s *scene) world(t *testing.T) *world {
	t.Helper()
	w := &world{namespace: "demo", service: "foo", mcsvc: s.mcsvc}
	hub := []runtime.Object{s.secret2, s.refusal}
	for _, l := range s.leaders {
		hub = append(hub, l)
	}
	hubKube := kubefake.NewClientset(present(hub)...)
	s.forbid(hubKube, "hub")
	w.hub = readHub(t.Context(), hubKube, "mcs-system")
	members := map[string][]runtime.Object{
		"member1": {s.service1, s.slice1, s.pod1, s.policy1},
		"member2": append([]runtime.Object{s.derived2, s.local2, s.imported2, s.local2Slice, s.lease2, s.coredns2, s.corefile2, s.pod2}, s.nodeLocal2...),
	}
	properties := map[string][]runtime.Object{"member2": {s.property2}}
	exports := map[string][]runtime.Object{"member1": {s.export1}, "member2": {s.import2}}
	for _, cluster := range []string{"member1", "member2"} {
		kube := kubefake.NewClientset(present(members[cluster])...)
		if cluster != s.noMCSAPI {
			kube.Resources = []*metav1.APIResourceList{{GroupVersion: "multicluster.x-k8s.io/v1beta1", APIResources: []metav1.APIResource{{Name: "serviceimports"}, {Name: "serviceexports"}}}}
		}
		if cluster == s.unreachable {
			kube.PrependReactor("get", "version", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, fmt.Errorf("dial tcp 10.0.0.2:6443: connect: connection refused")
			})
		}
		s.forbid(kube, cluster)
		kube.PrependReactor("create", "subjectaccessreviews", s.review)
		kube.PrependProxyReactor("pods", s.proxy)
		dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), present(properties[cluster])...)
		m := readMember(t.Context(), cluster, "demo", "foo", kube, mcsfake.NewSimpleClientset(present(exports[cluster])...), dyn)
		m.credentials = s.secrets[cluster]
		w.members = append(w.members, m)
	}
	return w
}

// forbid makes the API server of cluster refuse what the scene forbids.
func (s *scene) forbid(kube *kubefake.Clientset, cluster string) {
	for _, f := range s.forbidden {
		c, verbResource, _ := strings.Cut(f, " ")
		verb, resource, _ := strings.Cut(verbResource, " ")
		if c == cluster {
			kube.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", fmt.Errorf("you may not"))
			})
		}
	}
}

// present are the objects that are not nil pointers.
func present(objs []runtime.Object) []runtime.Object {
	var out []runtime.Object
	for _, o := range objs {
		if o != nil && !isNilPointer(o) {
			out = append(out, o)
		}
	}
	return out
}

func isNilPointer(o runtime.Object) bool { return reflect.ValueOf(o).IsNil() }

func streamsTo(out *bytes.Buffer) genericiooptions.IOStreams {
	return genericiooptions.IOStreams{Out: out, ErrOut: out}
}

// review answers a SubjectAccessReview: allowed unless the scene denies it.
func (s *scene) review(a k8stesting.Action) (bool, runtime.Object, error) {
	sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
	r := sar.Spec.ResourceAttributes
	sar.Status.Allowed = !s.denied[sar.Spec.User+" "+r.Verb+" "+r.Resource]
	return true, sar, nil
}

// proxy plays the API server's pods/proxy to CoreDNS's ready plugin and
// metrics.
func (s *scene) proxy(a k8stesting.Action) (bool, restclient.ResponseWrapper, error) {
	p := a.(k8stesting.ProxyGetAction)
	gr := schema.GroupResource{Resource: "pods"}
	switch {
	case s.proxyForbidden:
		return true, response{err: apierrors.NewForbidden(gr, p.GetName(), fmt.Errorf("cannot get resource \"pods/proxy\""))}, nil
	case p.GetPort() == "8181" && p.GetPath() == "/ready" && s.notReady != "":
		return true, response{body: s.notReady, err: apierrors.NewServiceUnavailable("the server is currently unable to handle the request")}, nil
	case p.GetPort() == "8181" && p.GetPath() == "/ready":
		return true, response{body: "OK"}, nil
	case p.GetPort() == "9153" && p.GetPath() == "/metrics":
		return true, response{body: s.metrics}, nil
	}
	return true, response{err: apierrors.NewServiceUnavailable("no such port")}, nil
}

type response struct {
	body string
	err  error
}

func (r response) DoRaw(context.Context) ([]byte, error) { return []byte(r.body), r.err }
func (r response) Stream(context.Context) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader(r.body)), r.err
}

// diagnose runs every check of the scene.
func (s *scene) diagnose(t *testing.T) *Diagnosis {
	t.Helper()
	o := &diagnoseOptions{dnsServers: s.dnsServers}
	return o.diagnose(t.Context(), s.world(t), now)
}

func TestDiagnoseHealthy(t *testing.T) {
	d := healthy(t).diagnose(t)
	if d.Failed != 0 || d.Unknown != 0 || d.FirstBroken != nil {
		t.Fatalf("a healthy service: %d failed, %d unknown\n%s", d.Failed, d.Unknown, listed(d))
	}
	for _, link := range linkOrder {
		if !hasLink(d, link) && link != linkDNS { // dns only with --dns
			t.Errorf("no check of link %s\n%s", link, listed(d))
		}
	}
}

// Each break of one link makes diagnose name that link first, with the
// problem and the fix a user reads.
func TestDiagnoseNamesTheFirstBrokenLink(t *testing.T) {
	const controller = "system:serviceaccount:mcs-system:mcs-member"
	const coredns = "system:serviceaccount:kube-system:coredns"
	for _, tc := range []struct {
		name                        string
		breakIt                     func(s *scene)
		link, cluster, problem, fix string
	}{
		{"an invalid spec", func(s *scene) {
			s.mcsvc.Status.Conditions[1] = metav1.Condition{Type: "EndpointSliceCollected", Status: "False", Reason: "InvalidSpec", Message: `unknown cluster "member9"`, ObservedGeneration: 1}
		}, linkHub, "", `EndpointSliceCollected=False (InvalidSpec): unknown cluster "member9"`, "edit mcsvc foo"},
		{"a spec not synced yet", func(s *scene) { s.mcsvc.Generation = 2 },
			linkHub, "", "ServiceApplied is of generation 1, not 2", "is mcs-controller running and leading?"},
		{"an expired credential", func(s *scene) {
			s.secrets = map[string]*CredentialReport{"member2": {Expires: now.Add(-time.Hour).Format(time.RFC3339)}}
		}, linkMember, "member2", "its credentials expired at", "kubectl mcs join member2 --context member2"},
		{"the controller's RBAC revoked", func(s *scene) { s.denied[controller+" create serviceimports"] = true },
			linkMember, "member1", "denied: create multicluster.x-k8s.io/serviceimports", "kubectl mcs join member1 --context member1"},
		{"a member unreachable", func(s *scene) { s.unreachable = "member2" },
			linkMember, "member2", "connection refused", "--member-context member2=CONTEXT"},
		{"no MCS API", func(s *scene) { s.noMCSAPI = "member1" },
			linkMember, "member1", "no version of the MCS API is served", "apply deploy/mcs-api"},
		{"an export of no Service", func(s *scene) {
			s.export1.Status.Conditions[0] = metav1.Condition{Type: "Valid", Status: "False", Reason: "NoService", Message: "no Service demo/foo"}
		}, linkExport, "member1", "Valid=False (NoService): no Service demo/foo", "reason NoService"},
		{"an export in conflict", func(s *scene) {
			s.export1.Status.Conditions[2] = metav1.Condition{Type: "Conflict", Status: "True", Reason: "PortConflict", Message: "member2's unnamed port is 8080/TCP"}
		}, linkExport, "member1", "Conflict=True (PortConflict)", "Condition Conflict"},
		{"no provider at all", func(s *scene) { s.mcsvc, s.export1, s.import2.Annotations = nil, nil, nil },
			linkExport, "", "no member exports it and no MultiClusterService provides it", "create a ServiceExport demo/foo"},
		{"no import", func(s *scene) { s.import2 = nil },
			linkImport, "member2", "there is no ServiceImport", "EndpointSliceApplied"},
		{"the wrong strategy", func(s *scene) { s.import2.Annotations[api.AnnotationStrategy] = "LocalFirst" },
			linkImport, "member2", "its strategy annotation is LocalFirst", "Answers are still local-only"},
		{"no derived Service", func(s *scene) { s.derived2 = nil },
			linkDerived, "member2", "there is no derived-foo", "is the controller running"},
		{"a derived VIP the import lacks", func(s *scene) { s.derived2.Spec.ClusterIPs = []string{"10.13.0.99"} },
			linkDerived, "member2", "its ClusterIPs [10.13.0.99] are not the import's spec.ips [10.13.0.50]", "writes it back"},
		{"an imported slice deleted", func(s *scene) { s.imported2 = nil },
			linkSlices, "member2", "imported-member1-foo-abc (of member1/foo-abc) is missing", "is it running"},
		{"an imported slice behind", func(s *scene) { s.slice1.Generation = 4 },
			linkSlices, "member2", "imported-member1-foo-abc is of generation 3 of member1/foo-abc, which is at 4", "mcs_member_reachable"},
		{"an imported slice left over", func(s *scene) { s.slice1.Name = "foo-new" },
			linkSlices, "member2", "imported-member1-foo-abc has no source slice left", "writes them"},
		{"a stale Lease", func(s *scene) { s.lease2.Spec.RenewTime.Time = now.Add(-time.Minute) },
			linkLease, "member2", "renewed 1m0s ago, past its 20 s: coredns-mcs calls member1 stale", `mcs_member_reachable{cluster="member1"}`},
		{"no Lease", func(s *scene) { s.lease2 = nil },
			linkLease, "member2", "there is none: the controller has not renewed it here", "renews it while it reaches member1"},
		{"the stock image", func(s *scene) {
			s.coredns2.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/coredns/coredns:v1.12.1"
			s.metrics = stockMetrics
		},
			linkCoreDNS, "member2", "pod coredns-1 exports no coredns_mcs_* metrics: it does not run mcs (it runs registry.k8s.io/coredns/coredns:v1.12.1)", "set image deploy/coredns coredns=<registry>/coredns-mcs:<tag>"},
		{"an image named coredns-mcs that runs no mcs", func(s *scene) { s.metrics = stockMetrics },
			linkCoreDNS, "member2", "exports no coredns_mcs_* metrics: it does not run mcs (it runs registry.example/coredns-mcs:v1)", "set image"},
		{"no ready endpoint anywhere", func(s *scene) {
			s.slice1.Endpoints[0].Conditions.Ready = ptr.To(false)
			s.slice1.Endpoints[1].Conditions.Ready = ptr.To(false)
			s.imported2.Endpoints = s.slice1.Endpoints
		}, linkExport, "", "no provider has a ready endpoint (ready: member1 0)", "pods are not Ready in any provider"},
		{"no ready endpoint in two providers", func(s *scene) {
			s.mcsvc.Spec.ServiceProvisionClusters = append(s.mcsvc.Spec.ServiceProvisionClusters, "member2")
			s.slice1.Endpoints = nil
			localPods(s)
		}, linkExport, "", "no provider has a ready endpoint (ready: member1 0, member2 0)", "get endpointslices -l kubernetes.io/service-name=foo"},
		{"an imported slice without the port", func(s *scene) {
			s.imported2.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("web"), Port: ptr.To(int32(8080))}}
		},
			linkConnect, "member2", `imported-member1-foo-abc (of member1) carries no port "http" (80/TCP): its 2 ready endpoints get none`, "Condition Conflict"},
		{"a NetworkPolicy admitting only its own cluster", func(s *scene) {
			s.policy1 = policy("same-namespace", networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}})
		}, linkConnect, "member1", "NetworkPolicy same-namespace selects its pods and admits nothing from outside the cluster", "add to same-namespace an ingress rule from the other clusters' pod CIDRs (ipBlock)"},
		{"a NetworkPolicy admitting remote pods to another port", func(s *scene) {
			s.policy1 = policy("metrics-only", networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(9090))}}})
		}, linkConnect, "member1", "NetworkPolicy metrics-only selects its pods and admits nothing from outside", "ipBlock"},
		{"NodeLocal DNSCache without clusterset.local", func(s *scene) { s.nodeLocal2 = nodeLocal(nodeLocalCorefile) },
			linkCoreDNS, "member2", "its Corefile has no clusterset.local server block", "clusterset.local:53 { errors; cache 5; reload; loop; bind <its bind addresses>; forward . __PILLAR__CLUSTER__DNS__"},
		{"NodeLocal DNSCache forwarding clusterset.local upstream", func(s *scene) {
			s.nodeLocal2 = nodeLocal(nodeLocalCorefile + "clusterset.local:53 {\n    forward . /etc/resolv.conf\n}\n")
		}, linkCoreDNS, "member2", "its clusterset.local block forwards to [/etc/resolv.conf], not to the cluster DNS (__PILLAR__CLUSTER__DNS__, 10.96.0.10)", "NodeLocal DNSCache"},
		{"a refused member Secret", func(s *scene) { s.refusal = refusal(s.secret2, `users["member2"].user.exec is refused`) },
			linkHub, "", `Secret mcs-system/member2 (cluster member2): users["member2"].user.exec is refused`, "A member is refused"},
		{"no leader", func(s *scene) { s.leaders = nil },
			linkHub, "", "there is no such Lease in mcs-system: no replica has led", "get pods -l app.kubernetes.io/name=mcs-controller"},
		{"a leader gone", func(s *scene) { s.leaders[0].Spec.RenewTime.Time = now.Add(-time.Minute) },
			linkHub, "", "Lease mcs-controller, held by ctl-1, was renewed 1m0s ago, past its 15 s", "No replica leads"},
		{"a leader released", func(s *scene) { s.leaders[0].Spec.HolderIdentity = nil },
			linkHub, "", "Lease mcs-controller is released: nobody leads", "No replica leads"},
		{"a shard without leader", func(s *scene) {
			s.leaders = []*coordinationv1.Lease{leaderLease("mcs-controller-shard-0", "2", -2*time.Second), leaderLease("mcs-controller-shard-1", "2", -time.Minute)}
		}, linkHub, "", "Lease mcs-controller-shard-1, held by ctl-1, was renewed 1m0s ago", "No replica leads"},
		{"a shard never led", func(s *scene) {
			s.leaders = []*coordinationv1.Lease{leaderLease("mcs-controller-shard-1", "3", -2*time.Second), leaderLease("mcs-controller", "", -time.Hour)}
		}, linkHub, "", "no Lease mcs-controller-shard-0: nobody leads its shard; no Lease mcs-controller-shard-2", "No replica leads"},
		{"a ClusterProperty naming another cluster", func(s *scene) { noClusterOption(s); s.property2 = clusterProperty("member9") },
			linkCoreDNS, "member2", `the mcs stanza has no cluster option, and ClusterProperty cluster.clusterset.k8s.io says "member9"`, "set `cluster member2` in the mcs stanza, or the ClusterProperty's spec.value to member2"},
		{"no cluster option and no ClusterProperty", func(s *scene) { noClusterOption(s) },
			linkCoreDNS, "member2", "there is no ClusterProperty cluster.clusterset.k8s.io (or its CRD is not served): mcs does not start", "set `cluster member2`"},
		{"no mcs stanza", func(s *scene) { s.corefile2.Data["Corefile"] = ".:53 {\n    kubernetes cluster.local\n}\n" },
			linkCoreDNS, "member2", "the Corefile has no mcs stanza", "apply deploy/overlays/member2"},
		{"another cluster name", func(s *scene) {
			s.corefile2.Data["Corefile"] = strings.Replace(s.corefile2.Data["Corefile"], "cluster member2", "cluster member9", 1)
		}, linkCoreDNS, "member2", "the mcs stanza says cluster member9", "set `cluster member2` in the mcs stanza"},
		{"CoreDNS's RBAC revoked", func(s *scene) { s.denied[coredns+" watch leases"] = true },
			linkCoreDNS, "member2", "kube-system/coredns is denied watch coordination.k8s.io/leases", "coredns-rbac.yaml"},
		{"CoreDNS not ready", func(s *scene) { s.notReady = "mcs" },
			linkCoreDNS, "member2", "pod coredns-1 is not ready on :8181/ready", "SERVFAIL, before CoreDNS has synced"},
		{"no CoreDNS pod", func(s *scene) { s.pod2.Status.Phase = corev1.PodPending },
			linkCoreDNS, "member2", "no CoreDNS pod is Running", "describe deploy/coredns"},
		{"mcs not synced", func(s *scene) {
			s.metrics = strings.Replace(healthyMetrics, `resource="leases"} 1`, `resource="leases"} 0`, 1)
		}, linkCoreDNS, "member2", "informer leases has not synced", "grep plugin/mcs"},
		{"mcs forbidden", func(s *scene) {
			s.metrics = strings.NewReplacer(`status="ok"} 1`, `status="ok"} 0`, `status="forbidden"} 0`, `status="forbidden"} 1`).Replace(healthyMetrics)
		}, linkCoreDNS, "member2", "its API server answers forbidden", "Permission errors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(t)
			tc.breakIt(s)
			d := s.diagnose(t)
			c := d.FirstBroken
			if c == nil {
				t.Fatalf("nothing broken\n%s", listed(d))
			}
			if c.Link != tc.link || c.Cluster != tc.cluster || c.Verdict != verdictFail || !strings.Contains(c.Problem, tc.problem) || !strings.Contains(c.Fix, tc.fix) {
				t.Errorf("first broken link %+v, want %s %s saying %q, fix %q\n%s", *c, tc.link, tc.cluster, tc.problem, tc.fix, listed(d))
			}
		})
	}
}

// A check diagnose may not make (pods/proxy forbidden) is unknown, says
// why, and fails nothing.
func TestDiagnoseCannotReadReadiness(t *testing.T) {
	s := healthy(t)
	s.proxyForbidden = true
	d := s.diagnose(t)
	if d.Failed != 0 || d.Unknown != 1 {
		t.Fatalf("%d failed, %d unknown, want 0 and 1\n%s", d.Failed, d.Unknown, listed(d))
	}
	var c Check
	for _, c = range d.Checks {
		if c.Verdict == verdictUnknown {
			break
		}
	}
	if c.Link != linkCoreDNS || !strings.Contains(c.Problem, "you may not get pods/proxy in kube-system") || !strings.Contains(c.Fix, "get pods -l k8s-app=kube-dns") {
		t.Errorf("the unknown check %+v", c)
	}
}

func hasLink(d *Diagnosis, link string) bool {
	for _, c := range d.Checks {
		if c.Link == link {
			return true
		}
	}
	return false
}

func listed(d *Diagnosis) string {
	var b bytes.Buffer
	_ = d.list(&b)
	return b.String()
}

// answers is a DNS server on loopback that answers A queries from a map,
// and NXDOMAIN for every other name.
func answers(t *testing.T, names map[string][]string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg).SetReply(q)
		ips, ok := names[q.Question[0].Name]
		if !ok {
			m.Rcode = dns.RcodeNameError
		}
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

// The answer a name gets is checked against the one it should get: right
// answers pass, a wrong one and none fail, saying what it should be and
// why.
func TestDiagnoseAnswers(t *testing.T) {
	const native, set = "foo.demo.svc.cluster.local.", "foo.demo.svc.clusterset.local."
	for _, tc := range []struct {
		name    string
		answers map[string][]string
		problem string
	}{
		{"right", map[string][]string{native: {"10.13.0.50"}, set: {"10.13.0.50"}}, ""},
		{"the local VIP", map[string][]string{native: {"10.13.0.7"}, set: {"10.13.0.50"}},
			"it answers 10.13.0.7; it should be 10.13.0.50 (RemoteAndLocal answers the ServiceImport's VIP"},
		{"none", map[string][]string{set: {"10.13.0.50"}}, "no answer: NXDOMAIN, 0 answers; it should be 10.13.0.50"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(t)
			s.dnsServers = map[string]string{"member2": answers(t, tc.answers)}
			d := s.diagnose(t)
			switch {
			case !hasLink(d, linkDNS):
				t.Fatalf("no dns check\n%s", listed(d))
			case tc.problem == "" && d.Failed != 0:
				t.Errorf("right answers failed\n%s", listed(d))
			case tc.problem != "" && (d.FirstBroken == nil || d.FirstBroken.Link != linkDNS || !strings.Contains(d.FirstBroken.Problem, tc.problem)):
				t.Errorf("want the dns link broken, saying %q\n%s", tc.problem, listed(d))
			}
		})
	}
}

// With every provider stale, a coredns-mcs that answers as the plugin does
// (its tests: TestStaleClustersAllStale, TestLocalFirstPolicy) passes the
// dns checks: a stale cluster is used only when nothing else is left, and
// the local endpoints are something. Only the Lease link says member1 is
// stale.
func TestDiagnoseStaleProviderAnswers(t *testing.T) {
	const native, set = "foo.demo.svc.cluster.local.", "foo.demo.svc.clusterset.local."
	for _, tc := range []struct {
		name   string
		change func(s *scene)
		native string
	}{
		{"RemoteAndLocal endpoints, local ready: L only", func(s *scene) { endpointsMode(s) }, "10.12.0.9"},
		{"LocalFirst, below its minimum: the local VIP", func(s *scene) {
			toLocalFirst(s)
			s.import2.Annotations[api.AnnotationMinReadyEndpoints] = "2"
		}, "10.13.0.7"},
		{"LocalFirst endpoints, below its minimum: L", func(s *scene) {
			toLocalFirst(s)
			endpointsMode(s)
			s.import2.Annotations[api.AnnotationMinReadyEndpoints] = "2"
		}, "10.12.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(t)
			staleProvider(s)
			localPods(s, "10.12.0.9")
			tc.change(s)
			s.dnsServers = map[string]string{"member2": answers(t, map[string][]string{native: {tc.native}, set: {"10.13.0.50"}})}
			d := s.diagnose(t)
			if !hasLink(d, linkDNS) {
				t.Fatalf("no dns check\n%s", listed(d))
			}
			for _, c := range d.Checks {
				if c.Link == linkDNS && c.Verdict != verdictOK {
					t.Errorf("a right answer failed: %s: %s\n%s", c.Name, c.Problem, listed(d))
				}
			}
			if d.FirstBroken == nil || d.FirstBroken.Link != linkLease {
				t.Errorf("want the lease link first broken\n%s", listed(d))
			}
		})
	}
}

// What a native name should answer, by strategy, answer mode, local and
// remote endpoints and staleness (plugin/mcs/README.md's table).
func TestExpectNative(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s *scene)
		want   string // addresses, or "skip"
	}{
		{"RemoteAndLocal vip", func(*scene) {}, "10.13.0.50"},
		{"RemoteAndLocal endpoints", func(s *scene) { endpointsMode(s) }, "10.10.0.5 10.10.0.6"},
		{"RemoteAndLocal endpoints, local too", func(s *scene) { endpointsMode(s); localPods(s, "10.12.0.9") }, "10.10.0.5 10.10.0.6 10.12.0.9"},
		{"LocalFirst, local ready: the local VIP", func(s *scene) { toLocalFirst(s); localPods(s, "10.12.0.9") }, "10.13.0.7"},
		{"LocalFirst, none local: the set VIP", func(s *scene) { toLocalFirst(s); localPods(s) }, "10.13.0.50"},
		{"LocalFirst endpoints, local ready", func(s *scene) { toLocalFirst(s); endpointsMode(s); localPods(s, "10.12.0.9") }, "10.12.0.9"},
		{"LocalFirst endpoints, 2 needed, 1 ready", func(s *scene) {
			toLocalFirst(s)
			endpointsMode(s)
			localPods(s, "10.12.0.9")
			s.import2.Annotations[api.AnnotationMinReadyEndpoints] = "2"
		}, "10.10.0.5 10.10.0.6"},
		// As the plugin's table: with nothing ready, VIP_local, and in
		// endpoints mode the next plugin.
		{"LocalFirst, nothing ready: the local VIP", func(s *scene) { toLocalFirst(s); localPods(s); s.imported2.Endpoints = nil }, "10.13.0.7"},
		{"LocalFirst endpoints, nothing ready", func(s *scene) { toLocalFirst(s); endpointsMode(s); localPods(s); s.imported2.Endpoints = nil }, "skip"},
		{"no strategy", func(s *scene) { delete(s.import2.Annotations, api.AnnotationStrategy) }, "skip"},
		// A stale cluster is used only when nothing else is left: with L
		// ready, the plugin answers L alone (plugin/mcs/README.md, "Stale
		// clusters").
		{"RemoteAndLocal endpoints, every provider stale, local ready: L only", func(s *scene) {
			endpointsMode(s)
			staleProvider(s)
			localPods(s, "10.12.0.9")
		}, "10.12.0.9"},
		{"RemoteAndLocal endpoints, every provider stale, none local: the stale", func(s *scene) {
			endpointsMode(s)
			staleProvider(s)
		}, "10.10.0.5 10.10.0.6"},
		{"LocalFirst endpoints, 2 needed, 1 ready, every provider stale: L", func(s *scene) {
			toLocalFirst(s)
			endpointsMode(s)
			localPods(s, "10.12.0.9")
			s.import2.Annotations[api.AnnotationMinReadyEndpoints] = "2"
			staleProvider(s)
		}, "10.12.0.9"},
		{"LocalFirst, 2 needed, 1 ready, every provider stale: the local VIP", func(s *scene) {
			toLocalFirst(s)
			localPods(s, "10.12.0.9")
			s.import2.Annotations[api.AnnotationMinReadyEndpoints] = "2"
			staleProvider(s)
		}, "10.13.0.7"},
		{"LocalFirst endpoints, none local, every provider stale: the stale", func(s *scene) {
			toLocalFirst(s)
			endpointsMode(s)
			localPods(s)
			staleProvider(s)
		}, "10.10.0.5 10.10.0.6"},
		{"LocalFirst endpoints, order: the first listed with endpoints", func(s *scene) {
			toLocalFirst(s)
			endpointsMode(s)
			s.import2.Annotations[api.AnnotationFailoverOrder] = "member9,member1"
		}, "10.10.0.5 10.10.0.6"},
		{"LocalFirst vip, order, none local: the first listed provider's own VIP", func(s *scene) {
			toLocalFirst(s)
			localPods(s)
			s.import2.Annotations[api.AnnotationFailoverOrder] = "member9,member1"
			s.import2.Annotations[api.AnnotationProviderVIPs] = "member1=10.13.0.77"
		}, "10.13.0.77"},
		{"LocalFirst vip, order, no provider VIP yet: the clusterset VIP", func(s *scene) {
			toLocalFirst(s)
			localPods(s)
			s.import2.Annotations[api.AnnotationFailoverOrder] = "member9,member1"
		}, "10.13.0.50"},
		{"LocalFirst vip, enough local: the local VIP, whatever the order", func(s *scene) {
			toLocalFirst(s)
			localPods(s, "10.12.0.9")
			s.import2.Annotations[api.AnnotationFailoverOrder] = "member1"
			s.import2.Annotations[api.AnnotationProviderVIPs] = "member1=10.13.0.77"
		}, "10.13.0.7"},
		// The pods listen on 8080, the service's port is 80: no pod address answers it.
		{"RemoteAndLocal endpoints, pods on another port: the VIP", func(s *scene) {
			endpointsMode(s)
			remappedPorts(s)
		}, "10.13.0.50"},
		{"RemoteAndLocal vip, no clusterset VIP yet, pods on another port: the kubernetes plugin", func(s *scene) {
			s.import2.Spec.IPs = nil
			remappedPorts(s)
		}, "skip"},
		{"RemoteAndLocal vip, no clusterset VIP yet, pods on the service's port: the pods", func(s *scene) {
			s.import2.Spec.IPs = nil
		}, "10.10.0.5 10.10.0.6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(t)
			tc.change(s)
			m := s.world(t).member("member2")
			e := expectNative(m, now)
			got := strings.Join(e.addrs, " ")
			if e.skip {
				got = "skip"
			}
			if got != tc.want {
				t.Errorf("expected %q (%s), want %q", got, e.why, tc.want)
			}
		})
	}
}

// remappedPorts gives the service port http 80 and its pods, imported
// from member1, the targetPort 8080.
func remappedPorts(s *scene) {
	s.import2.Spec.Ports = []mcsv1b1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}
	s.imported2.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8080))}}
}

func endpointsMode(s *scene) {
	s.corefile2.Data["Corefile"] = strings.Replace(s.corefile2.Data["Corefile"], "cluster member2", "cluster member2\n       answer endpoints", 1)
}

func toLocalFirst(s *scene) {
	s.mcsvc.Spec.Strategy = api.LocalFirst
	s.import2.Annotations[api.AnnotationStrategy] = string(api.LocalFirst)
}

// staleProvider lets member1's Lease in member2 expire: member1 is then
// member2's only provider, and stale.
func staleProvider(s *scene) { s.lease2.Spec.RenewTime.Time = now.Add(-time.Hour) }

// localPods gives member2 a Service foo of its own with ready pods at ips.
func localPods(s *scene, ips ...string) {
	s.local2 = &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: "foo"}, Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.13.0.7"}}}
	s.local2Slice = &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "demo", Name: "foo-local", Labels: map[string]string{discoveryv1.LabelServiceName: "foo"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, ip := range ips {
		s.local2Slice.Endpoints = append(s.local2Slice.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
}

// -o json has the documented field names, and the first broken link.
func TestDiagnoseJSON(t *testing.T) {
	s := healthy(t)
	s.derived2 = nil
	var out bytes.Buffer
	o := &diagnoseOptions{statusOptions: statusOptions{hubOptions: hubOptions{streams: streamsTo(&out)}, output: "json"}}
	if err := o.print(s.diagnose(t)); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	first, _ := doc["firstBroken"].(map[string]any)
	checks, _ := doc["checks"].([]any)
	if doc["namespace"] != "demo" || doc["service"] != "foo" || doc["failed"] != 1.0 || doc["unknown"] != 0.0 || len(checks) == 0 ||
		first["link"] != "derived" || first["cluster"] != "member2" || first["verdict"] != "fail" || first["check"] == nil || first["problem"] == nil || first["fix"] == nil {
		t.Errorf("-o json:\n%s", out.String())
	}
}

// stockMetrics are a CoreDNS's without mcs.
const stockMetrics = `# TYPE coredns_build_info gauge
coredns_build_info{version="1.12.1"} 1
`

// policy is a NetworkPolicy in demo of foo's pods with rules.
func policy(name string, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "demo", Name: name}, Spec: networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}, Ingress: rules,
	}}
}

// nodeLocalCorefile is the Kubernetes addon's node-local-dns Corefile, as
// it ships.
const nodeLocalCorefile = `cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health __PILLAR__LOCAL__DNS__:8080
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
    }
`

// nodeLocal is NodeLocal DNSCache in member2, with corefile, and kube-dns
// at 10.96.0.10.
func nodeLocal(corefile string) []runtime.Object {
	return []runtime.Object{
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-local-dns"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "node-local-dns"}, Data: map[string]string{"Corefile": corefile}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}, Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.96.0.10"}}},
	}
}

// refusal is the controller's Warning Event refusing s as it is.
func refusal(s *corev1.Secret, msg string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name + ".1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Secret", Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
		Type:           corev1.EventTypeWarning, Reason: "MemberRefused", Message: msg, LastTimestamp: metav1.NewTime(now.Add(-time.Minute)),
	}
}

// noClusterOption takes the cluster option out of member2's mcs stanza.
func noClusterOption(s *scene) {
	s.corefile2.Data["Corefile"] = mcsClusterRE.ReplaceAllString(s.corefile2.Data["Corefile"], "")
}

func clusterProperty(value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "about.k8s.io/v1alpha1", "kind": "ClusterProperty",
		"metadata": map[string]any{"name": "cluster.clusterset.k8s.io"},
		"spec":     map[string]any{"value": value},
	}}
}

// What a healthy data path may look like besides the scene's: diagnose
// passes each.
func TestDiagnoseAccepts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(s *scene)
	}{
		{"the cluster name from the ClusterProperty", func(s *scene) { noClusterOption(s); s.property2 = clusterProperty("member2") }},
		{"a mirrored image not named coredns-mcs", func(s *scene) {
			s.coredns2.Spec.Template.Spec.Containers[0].Image = "mirror.example/platform/dns:1.12.1-7"
		}},
		{"NodeLocal DNSCache forwarding clusterset.local to its pillar", func(s *scene) {
			s.nodeLocal2 = nodeLocal(nodeLocalCorefile + "clusterset.local:53 {\n    forward . __PILLAR__CLUSTER__DNS__ {\n        force_tcp\n    }\n}\n")
		}},
		{"NodeLocal DNSCache forwarding clusterset.local to kube-dns", func(s *scene) {
			s.nodeLocal2 = nodeLocal(nodeLocalCorefile + "clusterset.local.:53 {\n    forward . 10.96.0.10:53\n}\n")
		}},
		{"a refusal of the Secret before it changed", func(s *scene) {
			s.refusal = refusal(s.secret2, "refused")
			s.secret2.ResourceVersion = "8"
		}},
		{"a NetworkPolicy admitting an ipBlock", func(s *scene) {
			s.policy1 = policy("remote", networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.10.0.0/16"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8000)), EndPort: ptr.To(int32(8100))}}})
		}},
		{"a NetworkPolicy admitting every namespace", func(s *scene) {
			s.policy1 = policy("mesh", networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}})
		}},
		{"a NetworkPolicy of other pods", func(s *scene) {
			s.policy1 = policy("other")
			s.policy1.Spec.PodSelector.MatchLabels = map[string]string{"app": "db"}
		}},
		{"an egress-only NetworkPolicy", func(s *scene) {
			s.policy1 = policy("egress")
			s.policy1.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
		}},
		{"every shard led", func(s *scene) {
			s.leaders = []*coordinationv1.Lease{leaderLease("mcs-controller-shard-0", "2", -2*time.Second), leaderLease("mcs-controller-shard-1", "2", -5*time.Second),
				leaderLease("mcs-controller", "", -time.Hour)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := healthy(t)
			tc.change(s)
			if d := s.diagnose(t); d.Failed != 0 || d.Unknown != 0 {
				t.Errorf("%d failed, %d unknown\n%s", d.Failed, d.Unknown, listed(d))
			}
		})
	}
}

// A NetworkPolicy diagnose cannot be sure of is a warning: it fails, and
// says so.
func TestDiagnoseNetworkPolicyWarns(t *testing.T) {
	s := healthy(t)
	s.policy1 = policy("deny-all")
	d := s.diagnose(t)
	if c := d.FirstBroken; c == nil || c.Severity != severityWarning || d.Failed != 1 || !strings.Contains(listed(d), "WARN  connect member1: ") {
		t.Errorf("want one warning\n%s", listed(d))
	}
}

// What diagnose may not read makes that check unknown, says what, and
// fails nothing: the member is still read.
func TestDiagnoseCannotReadOptional(t *testing.T) {
	for _, tc := range []struct{ forbidden, check, problem string }{
		{"member1 list networkpolicies", "NetworkPolicies in demo admit", "NetworkPolicies in demo: networkpolicies is forbidden"},
		{"member1 list pods", "NetworkPolicies in demo admit", "pods in demo: pods is forbidden"},
		{"member2 get daemonsets", "NodeLocal DNSCache", "DaemonSet kube-system/node-local-dns: daemonsets is forbidden"},
		{"hub list events", "is refused", "events in mcs-system: events is forbidden"},
		{"hub list leases", "mcs-controller leads", "leases in mcs-system: leases is forbidden"},
	} {
		t.Run(tc.forbidden, func(t *testing.T) {
			s := healthy(t)
			s.policy1 = policy("remote", networkingv1.NetworkPolicyIngressRule{})
			s.forbidden = []string{tc.forbidden}
			d := s.diagnose(t)
			var unknowns []Check
			for _, c := range d.Checks {
				if c.Verdict == verdictUnknown {
					unknowns = append(unknowns, c)
				}
			}
			if d.Failed != 0 || len(unknowns) != 1 || !strings.Contains(unknowns[0].Name, tc.check) || !strings.Contains(unknowns[0].Problem, tc.problem) {
				t.Errorf("want only %q unknown, saying %q\n%s", tc.check, tc.problem, listed(d))
			}
		})
	}
}

// The copies of imported slices that a provider Service of a failover
// order routes to are not imported slices: diagnose reads each endpoint
// once, and a healthy service stays healthy.
func TestDiagnoseLeavesProviderCopiesOut(t *testing.T) {
	s := healthy(t)
	cp := s.imported2.DeepCopy()
	cp.Name = api.ProviderSlicePrefix + cp.Name
	cp.Labels[discoveryv1.LabelServiceName] = api.ProviderService("foo", "member1")
	s.nodeLocal2 = append(s.nodeLocal2, cp) // another object of member2
	for _, m := range s.world(t).members {
		if m.cluster == "member2" && (len(m.imported) != 1 || m.imported[0].Name != s.imported2.Name) {
			t.Errorf("member2's imported slices %d, want %s alone", len(m.imported), s.imported2.Name)
		}
	}
	if d := s.diagnose(t); d.Failed != 0 || d.Unknown != 0 {
		t.Errorf("with a provider copy: %d failed, %d unknown\n%s", d.Failed, d.Unknown, listed(d))
	}
}
