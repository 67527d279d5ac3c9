package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labnet"
)

// Result is what the story saw, for its test.
type Result struct {
	NativeAnswer     []string // step 4: serve's cluster.local A records from member2's coredns-mcs
	ClusterSetAnswer []string // step 4: its clusterset.local A records
	ServiceImportIPs []string // step 4: member2's ServiceImport's spec.ips
	Spread           []Reply  // step 5: serve in member1 only, by its native name
	ClusterSet       []Reply  // step 5: the same by its clusterset name
	Split            []Reply  // step 6: RemoteAndLocal with serve in member2 too
	Local            []Reply  // step 7: LocalFirst
	Failover         []Reply  // step 7: member2 scaled to 0, until the first reply from member1
	FailoverAfter    time.Duration
	Back             []Reply // step 7: member2 scaled back, until the first reply from member2
	BackAfter        time.Duration
	// Step 8: member2 at 3 pods of at least 2, then at 1 (to member3,
	// the first of the order), member3 at 0 (to member1), and back.
	Tuned          []Reply
	ToMember3      []Reply
	ToMember3After time.Duration
	TunedVIP       []string // member2's VIP coredns-mcs below the minimum
	Member3VIP     []string // the ClusterIPs of serve's provider Service of member3 in member2
	TunedVIPReq    []Reply  // connections to TunedVIP, through kube-proxy
	ToMember1      []Reply
	ToMember1After time.Duration
	TunedBack      []Reply
	TunedBackAfter time.Duration
}

// story is one run of the demo.
type story struct {
	root       string // the repository's top
	dir        string // _output/demo
	kubeconfig string // the lab's
	kubectlBin string
	w          io.Writer
	clusters   *clusters

	controllerHTTP string
	coredns        map[string]coredns // by member

	servers *labnet.Servers // play serve's pods from step 5 on
	stop    func()          // stops following the pods
	via     resolver        // whom the client asks: member2's coredns-mcs

	res Result
}

func newStory(root string, w io.Writer) (*story, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	s := &story{
		root: root, dir: filepath.Join(root, "_output", "demo"),
		kubeconfig: filepath.Join(root, "_output", "lab", "kubeconfig"),
		kubectlBin: filepath.Join(root, "_output", "bin", "kubectl"),
		w:          w, coredns: map[string]coredns{},
	}
	for _, need := range []struct{ path, fix string }{
		{filepath.Join(root, "bin", "mcs-controller"), "make build"},
		{filepath.Join(root, "bin", "coredns-mcs"), "make build"},
		{s.kubectlBin, "make lab-up (test/lab/build.sh builds it)"},
		{s.kubeconfig, "make lab-up"},
	} {
		if _, err := os.Stat(need.path); err != nil {
			return nil, fmt.Errorf("%s is missing: %s", s.rel(need.path), need.fix)
		}
	}
	if _, err := exec.LookPath("dig"); err != nil {
		return nil, fmt.Errorf("dig is needed (Debian's bind9-dnsutils): %w", err)
	}
	if err := labnet.Check(filepath.Join(root, "_output", "lab")); err != nil {
		return nil, fmt.Errorf("the requests of steps 5 to 7 go through the lab's kube-proxy: %w", err)
	}
	if s.clusters, err = newClusters(s.kubeconfig); err != nil {
		return nil, err
	}
	return s, nil
}

// play runs the steps in order and stops at the first that fails, naming it.
func (s *story) play(ctx context.Context) (*Result, error) {
	defer s.close()
	steps := []struct {
		title string
		run   func(context.Context) error
	}{
		{"mcs-controller on the hub, coredns-mcs for each member", s.start},
		{"serve (a Deployment and a Service) in member1, namespace demo", s.serve},
		{"export serve: a ServiceExport in member1, a MultiClusterService on the hub", s.export},
		{"what member2 now holds, and the MultiClusterService's conditions on the hub", s.inspect},
		{"DNS from member2's coredns-mcs", s.dns},
		{"real requests from member2's node, through its kube-proxy", s.requestsFromMember2},
		{"RemoteAndLocal: serve in member2 too, connections over both clusters", s.remoteAndLocal},
		{"LocalFirst: member2's serve scaled to 0 and back", s.localFirst},
		{"LocalFirst tuned: a minimum of ready local pods, and a failover order", s.localFirstTuned},
		{"look around", s.lookAround},
	}
	for i, st := range steps {
		fmt.Fprintf(s.w, "\n=== Step %d: %s\n\n", i, st.title)
		if err := st.run(ctx); err != nil {
			return &s.res, fmt.Errorf("step %d (%s): %w", i, st.title, err)
		}
	}
	return &s.res, nil
}

func (s *story) close() {
	if s.servers != nil {
		s.stop()
		if err := s.servers.Close(); err != nil {
			fmt.Fprintf(s.w, "unbinding the pods' addresses: %v\n", err)
		}
	}
}

func (s *story) start(ctx context.Context) error {
	for _, c := range append([]string{hub}, members...) {
		if _, err := s.clusters.kube[c].Discovery().ServerVersion(); err != nil {
			return fmt.Errorf("cluster %s does not answer (make lab-status says why; make lab-up starts the lab): %w", c, err)
		}
	}
	if err := s.stopPrevious(); err != nil {
		return fmt.Errorf("stopping the previous run's processes: %w", err)
	}
	s.say("The hub gets the MultiClusterService CRD, as an operator installs it:")
	if err := s.kubectl(ctx, "--context", hub, "apply", "-f", "deploy/crds/mcs.coredns-mcs.io_multiclusterservices.yaml"); err != nil {
		return err
	}
	if err := s.kubectl(ctx, "--context", hub, "wait", "--for", "condition=Established", "--timeout", "60s",
		"crd/multiclusterservices.mcs.coredns-mcs.io"); err != nil {
		return err
	}
	s.say("\nmcs-controller runs against the hub with the members as the contexts of --clusters-kubeconfig;")
	s.say("--watch-namespaces demo keeps it out of every other namespace (the lab tests' among them),")
	s.say("--create-namespaces lets it make demo in a consumer that lacks it (off by default),")
	s.say("and a single replica needs no leader election:")
	if err := s.startController(ctx); err != nil {
		return err
	}
	s.say("\nEach member gets the coredns-mcs that would replace its CoreDNS, here on loopback ports with")
	s.say("corefile/lab.Corefile: the shipped member Corefile's mcs stanza (answer vip, the default) and labels line on loopback:")
	for _, m := range members {
		c, err := s.startCoreDNS(ctx, corednsName(m), m, "vip")
		if err != nil {
			return err
		}
		s.coredns[m] = c
	}
	s.via = resolver{dns: s.coredns[member2].dns, port: servicePort}
	return nil
}

func (s *story) serve(ctx context.Context) error {
	s.say("serve runs in member1 only for now; what a previous run left in member2 and member3 goes first,")
	s.say("and its MultiClusterService, which the later steps changed:")
	if err := s.kubectl(ctx, "--context", hub, "-n", namespace, "delete", "multiclusterservice/serve", "--ignore-not-found"); err != nil {
		return err
	}
	for _, c := range []string{member2, member3} {
		if err := s.kubectl(ctx, "--context", c, "-n", namespace, "delete", "deployment/serve", "service/serve", "--ignore-not-found"); err != nil {
			return err
		}
		if err := s.waitFor(ctx, c+" runs no serve pod", time.Minute, func(ctx context.Context) error {
			return s.deploymentReady(ctx, c, 0)
		}); err != nil {
			return err
		}
	}
	fmt.Fprintln(s.w)
	if err := s.kubectl(ctx, "--context", member1, "apply", "-f", "test/demo/manifests/namespace.yaml", "-f", "test/demo/manifests/serve.yaml"); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "member1's serve pods are ready", time.Minute, func(ctx context.Context) error {
		return s.deploymentReady(ctx, member1, -1)
	}); err != nil {
		return err
	}
	return s.kubectl(ctx, "--context", member1, "-n", namespace, "get", "deployments,services,pods", "-o", "wide")
}

// deploymentReady is nil once cluster runs exactly serve's replicas, all
// ready: want of them, or the Deployment's replicas when want < 0.
func (s *story) deploymentReady(ctx context.Context, cluster string, want int) error {
	if want < 0 {
		d, err := s.clusters.kube[cluster].AppsV1().Deployments(namespace).Get(ctx, svcName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		want = int(*d.Spec.Replicas)
	}
	all, err := s.clusters.kube[cluster].CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: podSelector})
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	ready, err := s.clusters.readyIPs(ctx, cluster)
	if err != nil {
		return err
	}
	if len(all.Items) != want || len(ready) != want {
		return fmt.Errorf("%s has %d serve pods, %d of them ready; want %d", cluster, len(all.Items), len(ready), want)
	}
	return nil
}

func (s *story) export(ctx context.Context) error {
	s.say("The MCS API's way: a ServiceExport beside the Service in member1.")
	if err := s.show("test/demo/manifests/serviceexport.yaml"); err != nil {
		return err
	}
	if err := s.kubectl(ctx, "--context", member1, "apply", "-f", "test/demo/manifests/serviceexport.yaml"); err != nil {
		return err
	}
	s.say("\nThe native way: a MultiClusterService on the hub, provided by member1 and consumed in member2.")
	if err := s.show("test/demo/manifests/multiclusterservice.yaml"); err != nil {
		return err
	}
	if err := s.kubectl(ctx, "--context", hub, "apply", "-f", "test/demo/manifests/hub-namespace.yaml", "-f", "test/demo/manifests/multiclusterservice.yaml"); err != nil {
		return err
	}
	s.say("\nmcs-controller writes derived-serve, a ServiceImport and the imported EndpointSlices into member2:")
	return s.waitFor(ctx, "mcs-controller has converged", time.Minute, func(ctx context.Context) error {
		return s.clusters.converged(ctx, api.RemoteAndLocal, member1)
	})
}

func (s *story) inspect(ctx context.Context) error {
	s.say("In member2, derived-serve has the ClusterIP that the ServiceImport carries; it has no selector:")
	s.say("its endpoints are the imported slices.")
	if err := s.kubectl(ctx, "--context", member2, "-n", namespace, "get", "services", "-o", "wide"); err != nil {
		return err
	}
	s.say("\nThe imported EndpointSlices hold member1's pods, labelled with their source cluster:")
	if err := s.kubectl(ctx, "--context", member2, "-n", namespace, "get", "endpointslices",
		"-l", "multicluster.kubernetes.io/service-name=serve", "-L", "multicluster.kubernetes.io/source-cluster"); err != nil {
		return err
	}
	s.say("\nThe ServiceImport; its annotation mcs.coredns-mcs.io/strategy turns serve's native name on in member2:")
	if err := s.kubectl(ctx, "--context", member2, "-n", namespace, "get", "serviceimport", "serve", "-o", "yaml"); err != nil {
		return err
	}
	s.say("\nOn the hub, the MultiClusterService's conditions say what was done where:")
	return s.kubectl(ctx, "--context", hub, "-n", namespace, "describe", "multiclusterservice", "serve")
}

func (s *story) dns(ctx context.Context) error {
	imp, err := s.clusters.mcs[member2].MulticlusterV1beta1().ServiceImports(namespace).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.res.ServiceImportIPs = sortIPs(slices.Clone(imp.Spec.IPs))
	if err := s.waitFor(ctx, "member2's coredns-mcs answers derived-serve's VIP", 30*time.Second, s.answers(nativeName, s.res.ServiceImportIPs)); err != nil {
		return err
	}
	s.say("\nThe native name answers derived-serve's ClusterIP (answer vip), whose endpoints are member1's pods:")
	if err := s.dig(ctx, s.coredns[member2].dns, nativeName); err != nil {
		return err
	}
	s.say("\nThe clusterset name answers the ServiceImport's IP, the same address (MCS API DNS spec):")
	if err := s.dig(ctx, s.coredns[member2].dns, clustersetName); err != nil {
		return err
	}
	if s.res.NativeAnswer, err = lookup(ctx, s.coredns[member2].dns, nativeName); err != nil {
		return err
	}
	if s.res.ClusterSetAnswer, err = lookup(ctx, s.coredns[member2].dns, clustersetName); err != nil {
		return err
	}
	if !slices.Equal(s.res.ClusterSetAnswer, s.res.ServiceImportIPs) {
		return fmt.Errorf("%s answered %v, want the ServiceImport's IPs %v", clustersetName, s.res.ClusterSetAnswer, s.res.ServiceImportIPs)
	}
	return nil
}

// answers is nil once the client's resolver answers name with exactly want.
func (s *story) answers(name string, want []string) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := lookup(ctx, s.via.dns, name)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s answers %v, want %v", name, got, want)
		}
		return nil
	}
}

// dig shows what the coredns-mcs at addr answers for name.
func (s *story) dig(ctx context.Context, addr, name string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, "dig", "@"+host, "-p", port, "+noall", "+answer", name)
	return err
}

func (s *story) requestsFromMember2(ctx context.Context) error {
	s.servers = labnet.NewServers(podPort)
	follow, stop := context.WithCancel(ctx)
	s.stop = stop
	kube := map[string]kubernetes.Interface{}
	for _, m := range members {
		kube[m] = s.clusters.kube[m]
	}
	if err := s.servers.Follow(follow, kube, namespace, podSelector); err != nil {
		return err
	}
	s.say("Each serve pod's address is bound in the lab's pods' network, with a server answering as the MCS")
	s.say("API demo's serve image does. For each request, a client on member2's node resolves the name")
	s.say("through member2's coredns-mcs and sends GET http://<answer>:%d/ on a new connection; member2's", servicePort)
	s.say("real kube-proxy (nftables) sends it to one endpoint of the Service that owns the address.")
	s.say("kube-proxy programs a change at most once a second (its minSyncPeriod), so the demo first waits")
	s.say("for the route.\n")
	if err := s.routed(ctx, "member2's kube-proxy routes derived-serve to member1", member1); err != nil {
		return err
	}
	s.say("\nBy the native name, %s:", nativeName)
	s.res.Spread = s.requests(ctx, nativeName, 3*time.Second, 200*time.Millisecond)
	if err := allFrom(member1, s.res.Spread); err != nil {
		return err
	}
	s.say("\nBy the clusterset name, %s (the ServiceImport's IP):", clustersetName)
	s.res.ClusterSet = s.requests(ctx, clustersetName, time.Second, 200*time.Millisecond)
	return allFrom(member1, s.res.ClusterSet)
}

// clusterIPs is the sorted ClusterIPs of cluster's Service name.
func (s *story) clusterIPs(ctx context.Context, cluster, name string) ([]string, error) {
	svc, err := s.clusters.kube[cluster].CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cluster, err)
	}
	return sortIPs(slices.Clone(svc.Spec.ClusterIPs)), nil
}

// routed waits until a request for serve's native name is answered by
// cluster.
func (s *story) routed(ctx context.Context, what, cluster string) error {
	return s.waitFor(ctx, what, 30*time.Second, func(ctx context.Context) error {
		if r := s.ask(ctx, nativeName); r.Cluster != cluster {
			return fmt.Errorf("reply %q through %s", r.Text, r.Addr)
		}
		return nil
	})
}

func failures(replies []Reply) int {
	n := 0
	for _, r := range replies {
		if r.Cluster == "" {
			n++
		}
	}
	return n
}

// allFrom is nil when every reply came from cluster.
func allFrom(cluster string, replies []Reply) error {
	if len(replies) == 0 {
		return errors.New("no reply")
	}
	for _, r := range replies {
		if r.Cluster != cluster {
			return fmt.Errorf("reply %q through %s: want every reply from %s", r.Text, r.Addr, cluster)
		}
	}
	return nil
}

func (s *story) remoteAndLocal(ctx context.Context) error {
	s.say("serve starts in member2 as well, in the namespace mcs-controller made there for the import, and the")
	s.say("MultiClusterService makes member2 a provider too, still RemoteAndLocal:")
	if err := s.kubectl(ctx, "--context", member2, "apply", "-f", "test/demo/manifests/serve.yaml"); err != nil {
		return err
	}
	if err := s.kubectl(ctx, "--context", hub, "-n", namespace, "patch", "multiclusterservice", "serve", "--type", "merge",
		"-p", `{"spec":{"serviceProvisionClusters":["member1","member2"]}}`); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "member2's serve pods are ready", time.Minute, func(ctx context.Context) error {
		return s.deploymentReady(ctx, member2, -1)
	}); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "mcs-controller has converged", time.Minute, func(ctx context.Context) error {
		return s.clusters.converged(ctx, api.RemoteAndLocal, member1, member2)
	}); err != nil {
		return err
	}
	if err := s.routed(ctx, "member2's kube-proxy routes derived-serve to member2 too", member2); err != nil {
		return err
	}
	s.say("\nderived-serve's endpoints are now both clusters' pods; its VIP spreads connections over all of them.")
	s.say("Connections by the native name, without pause, counted by the cluster that replied:")
	s.res.Split = s.split(ctx, nativeName, splitRequests)
	for _, c := range []string{member1, member2} {
		if !slices.ContainsFunc(s.res.Split, func(r Reply) bool { return r.Cluster == c }) {
			return fmt.Errorf("no reply from %s in %d connections", c, splitRequests)
		}
	}
	return nil
}

// splitRequests is how many connections show RemoteAndLocal's spread.
const splitRequests = 60

func (s *story) localFirst(ctx context.Context) error {
	s.say("The MultiClusterService's strategy becomes LocalFirst:")
	if err := s.kubectl(ctx, "--context", hub, "-n", namespace, "patch", "multiclusterservice", "serve", "--type", "merge",
		"-p", `{"spec":{"strategy":"LocalFirst"}}`); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "mcs-controller has converged", time.Minute, func(ctx context.Context) error {
		return s.clusters.converged(ctx, api.LocalFirst, member1, member2)
	}); err != nil {
		return err
	}
	local, err := s.clusterIPs(ctx, member2, svcName)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, "member2's coredns-mcs answers member2's own Service", 30*time.Second, s.answers(nativeName, local)); err != nil {
		return err
	}
	if err := s.routed(ctx, "member2's kube-proxy routes serve to member2's pods", member2); err != nil {
		return err
	}
	s.say("\nWhile member2 has a ready pod of its own, the native name answers member2's own Service's ClusterIP:")
	if err := s.dig(ctx, s.coredns[member2].dns, nativeName); err != nil {
		return err
	}
	fmt.Fprintln(s.w)
	s.res.Local = s.requests(ctx, nativeName, 2*time.Second, 200*time.Millisecond)
	if err := allFrom(member2, s.res.Local); err != nil {
		return err
	}

	s.say("\nmember2's serve scaled to 0: the moment member2 has no ready pod, the native name answers")
	s.say("derived-serve's VIP, whose ready endpoints are member1's. Requests go on without pause; each change")
	s.say("of the answer or of who replies is shown, timed from the scale command:")
	derived, err := s.clusterIPs(ctx, member2, api.DerivedPrefix+svcName)
	if err != nil {
		return err
	}
	if s.res.Failover, s.res.FailoverAfter, err = s.scale(ctx, member2, 0, member1, derived); err != nil {
		return err
	}
	if n := failures(s.res.Failover); n > 0 {
		s.say("    (%d requests failed in between: kwok removes a pod at once, before its endpoint has left the", n)
		s.say("    slices and kube-proxy's rules; a real pod keeps serving while it terminates)")
	}
	s.say("\nScaled back: local again as soon as a member2 pod is ready:")
	s.res.Back, s.res.BackAfter, err = s.scale(ctx, member2, 2, member2, local)
	return err
}

func (s *story) localFirstTuned(ctx context.Context) error {
	s.say("serve runs in member3 too, with one pod, and in member2 with three. The MultiClusterService keeps")
	s.say("LocalFirst with a minimum of 2 ready local pods, and member3 then member1 to fail over to:")
	if err := s.kubectl(ctx, "--context", member3, "apply", "-f", "test/demo/manifests/namespace.yaml", "-f", "test/demo/manifests/serve.yaml"); err != nil {
		return err
	}
	for c, n := range map[string]string{member3: "1", member2: "3"} {
		if err := s.kubectl(ctx, "--context", c, "-n", namespace, "scale", "deployment/serve", "--replicas="+n); err != nil {
			return err
		}
	}
	if err := s.kubectl(ctx, "--context", hub, "-n", namespace, "patch", "multiclusterservice", "serve", "--type", "merge", "-p",
		`{"spec":{"serviceProvisionClusters":["member1","member2","member3"],"localFirst":{"minReadyEndpoints":2,"failoverOrder":["member3","member1"]}}}`); err != nil {
		return err
	}
	for c, n := range map[string]int{member3: 1, member2: 3} {
		if err := s.waitFor(ctx, c+"'s serve pods are ready", time.Minute, func(ctx context.Context) error { return s.deploymentReady(ctx, c, n) }); err != nil {
			return err
		}
	}
	if err := s.waitFor(ctx, "mcs-controller has converged", time.Minute, func(ctx context.Context) error {
		return s.clusters.converged(ctx, api.LocalFirst, member1, member2, member3)
	}); err != nil {
		return err
	}
	s.say("\nTo show which pods answer, a second coredns-mcs for member2, with answer endpoints, answers this")
	s.say("step's client, which then connects to the pod address itself (port %d, serve's port: coredns-mcs", podPort)
	s.say("answers pod addresses only for pods that listen on the service's port, as only the VIP translates it):")
	c, err := s.startCoreDNS(ctx, endpointsDNS, member2, "endpoints")
	if err != nil {
		return err
	}
	s.coredns[endpointsDNS] = c
	vipVia := s.via
	vipDNS := s.via.dns
	s.via = resolver{dns: c.dns, port: podPort}
	local, err := s.clusters.readyIPs(ctx, member2)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, "it answers member2's own pods", 30*time.Second, s.answers(nativeName, local)); err != nil {
		return err
	}
	s.res.Tuned = s.requests(ctx, nativeName, time.Second, 200*time.Millisecond)
	if err := allFrom(member2, s.res.Tuned); err != nil {
		return err
	}
	s.say("\nmember2 scaled to 1, below the minimum: member3, first in the order, answers alone:")
	if s.res.ToMember3, s.res.ToMember3After, err = s.scale(ctx, member2, 1, member3, nil); err != nil {
		return err
	}
	s.say("\nmember2's own coredns-mcs (answer vip) follows the order too: derived-serve's VIP would spread over")
	s.say("every provider, so for a service with an order mcs-controller makes a Service per listed provider")
	s.say("(derived-0<hash>), and below the minimum coredns-mcs answers member3's, which kube-proxy routes to")
	s.say("member3 alone:")
	if s.res.Member3VIP, err = s.clusterIPs(ctx, member2, api.ProviderService(svcName, member3)); err != nil {
		return err
	}
	if err := s.dig(ctx, vipDNS, nativeName); err != nil {
		return err
	}
	if s.res.TunedVIP, err = lookup(ctx, vipDNS, nativeName); err != nil {
		return err
	}
	endpointsVia := s.via
	s.via = vipVia
	s.res.TunedVIPReq = s.requests(ctx, nativeName, time.Second, 200*time.Millisecond)
	s.via = endpointsVia
	if err := allFrom(member3, s.res.TunedVIPReq); err != nil {
		return err
	}
	s.say("\nmember3 scaled to 0: member1, next in the order:")
	if s.res.ToMember1, s.res.ToMember1After, err = s.scale(ctx, member3, 0, member1, nil); err != nil {
		return err
	}
	s.say("\nmember2 scaled to 2, the minimum: its own pods again:")
	s.res.TunedBack, s.res.TunedBackAfter, err = s.scale(ctx, member2, 2, member2, nil)
	return err
}

func (s *story) lookAround(ctx context.Context) error {
	s.say("mcs-controller and the coredns-mcs processes keep running until make lab-down. To look around,")
	s.say("from the top of the repository:")
	s.say("\n  export KUBECONFIG=$PWD/_output/lab/kubeconfig PATH=$PWD/_output/bin:$PATH\n")
	if err := s.kubectl(ctx, "config", "get-contexts"); err != nil {
		return err
	}
	s.say("\n  kubectl --context member2 -n demo get services,endpointslices,serviceimports")
	s.say("  kubectl --context hub -n demo describe multiclusterservice serve")
	s.say("  kubectl --context member2 -n demo scale deployment/serve --replicas=0   # and dig again")
	for _, m := range members {
		_, port, _ := net.SplitHostPort(s.coredns[m].dns)
		s.say("  dig @127.0.0.1 -p %s %s   # %s's coredns-mcs", port, nativeName, m)
	}
	_, port, _ := net.SplitHostPort(s.coredns[endpointsDNS].dns)
	s.say("  dig @127.0.0.1 -p %s %s   # member2's second, answer endpoints", port, nativeName)
	s.say("\nMetrics: mcs-controller http://%s/metrics", s.controllerHTTP)
	for _, m := range members {
		s.say("         coredns-mcs of %s http://%s/metrics", m, s.coredns[m].metrics)
	}
	s.say("Logs:    %s/ (mcs-controller.log, coredns-mcs-<member>.log); the lab's in _output/lab/logs/", s.rel(filepath.Join(s.dir, "logs")))
	s.say("The pods' servers of steps 5 to 7 lived in this program, and are gone with their addresses.")
	s.say("\nStop everything, the lab included:\n\n  make lab-down")
	return nil
}
