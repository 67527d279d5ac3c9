package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Result is what the story saw, for its test.
type Result struct {
	NativeAnswer     []string // step 4: serve's cluster.local A records from member2's coredns-mcs
	ClusterSetAnswer []string // step 4: its clusterset.local A records
	ServiceImportIPs []string // step 4: member2's ServiceImport's spec.ips
	Spread           []Reply  // step 5: serve in member1 only
	Local            []Reply  // step 6: LocalFirst with serve in member2 too
	Failover         []Reply  // step 6: member2 scaled to 0, until the first reply from member1
	FailoverAfter    time.Duration
	Back             []Reply // step 6: member2 scaled back, until the first reply from member2
	BackAfter        time.Duration
	// NoNetns says why steps 5 and 6 asked DNS only, without requests.
	NoNetns string
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

	pods    *pods
	ns      *netns   // nil without a namespace
	servers *servers // nil without a namespace
	http    *http.Client

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
		{"real requests from member2's place", s.requestsFromMember2},
		{"LocalFirst: serve in member2 too, scaled to 0 and back", s.localFirst},
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
		s.servers.close()
	}
	if s.ns != nil {
		s.ns.close()
	}
	if s.pods != nil {
		close(s.pods.stop)
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
	s.say("and a single replica needs no leader election:")
	if err := s.startController(ctx); err != nil {
		return err
	}
	s.say("\nEach member gets the coredns-mcs that would replace its CoreDNS, here on loopback ports with")
	s.say("corefile/lab.Corefile (answer endpoints: the lab has no kube-proxy, so no ClusterIP is routed):")
	for _, m := range members {
		if err := s.startCoreDNS(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *story) serve(ctx context.Context) error {
	s.say("serve runs in member1 only for now; what a previous run left in member2 goes first:")
	if err := s.kubectl(ctx, "--context", member2, "-n", namespace, "delete", "deployment/serve", "service/serve", "--ignore-not-found"); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "member2 runs no serve pod", time.Minute, func(ctx context.Context) error {
		return s.deploymentReady(ctx, member2, 0)
	}); err != nil {
		return err
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
	ready, err := s.clusters.readyPods(ctx, cluster)
	if err != nil {
		return err
	}
	if len(all.Items) != want || len(ready) != want {
		return fmt.Errorf("%s has %d serve pods, %d of them ready; want %d", cluster, len(all.Items), len(ready), want)
	}
	return nil
}

func (s *story) export(ctx context.Context) error {
	s.say("The seeds' way, the MCS API's: a ServiceExport beside the Service in member1.")
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
	if err := s.kubectl(ctx, "--context", hub, "apply", "-f", "test/demo/manifests/namespace.yaml", "-f", "test/demo/manifests/multiclusterservice.yaml"); err != nil {
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
	want, err := s.clusters.readyIPs(ctx, member1)
	if err != nil {
		return err
	}
	imp, err := s.clusters.mcs[member2].MulticlusterV1beta1().ServiceImports(namespace).Get(ctx, svcName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s.res.ServiceImportIPs = sortIPs(slices.Clone(imp.Spec.IPs))
	if err := s.waitFor(ctx, "member2's coredns-mcs answers member1's pods", 30*time.Second, s.answers(nativeName, want)); err != nil {
		return err
	}
	s.say("\nThe native name answers member1's pod addresses (answer endpoints):")
	if err := s.dig(ctx, member2, nativeName); err != nil {
		return err
	}
	s.say("\nThe clusterset name answers the ServiceImport's IP, derived-serve's ClusterIP (MCS API DNS spec):")
	if err := s.dig(ctx, member2, clustersetName); err != nil {
		return err
	}
	if s.res.NativeAnswer, err = s.lookup(ctx, member2, nativeName); err != nil {
		return err
	}
	if s.res.ClusterSetAnswer, err = s.lookup(ctx, member2, clustersetName); err != nil {
		return err
	}
	if !slices.Equal(s.res.NativeAnswer, want) {
		return fmt.Errorf("%s answered %v, want member1's pods %v", nativeName, s.res.NativeAnswer, want)
	}
	if !slices.Equal(s.res.ClusterSetAnswer, s.res.ServiceImportIPs) {
		return fmt.Errorf("%s answered %v, want the ServiceImport's IPs %v", clustersetName, s.res.ClusterSetAnswer, s.res.ServiceImportIPs)
	}
	return nil
}

// answers is nil once member2's coredns-mcs answers name with exactly want.
func (s *story) answers(name string, want []string) func(context.Context) error {
	return func(ctx context.Context) error {
		got, err := s.lookup(ctx, member2, name)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("%s answers %v, want %v", name, got, want)
		}
		return nil
	}
}

// dig shows what member's coredns-mcs answers for name.
func (s *story) dig(ctx context.Context, member, name string) error {
	host, port, err := net.SplitHostPort(s.coredns[member].dns)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, "dig", "@"+host, "-p", port, "+noall", "+answer", name)
	return err
}

func (s *story) requestsFromMember2(ctx context.Context) error {
	var err error
	if s.pods, err = s.watchPods(ctx); err != nil {
		return err
	}
	if s.ns, err = newNetns(); err != nil {
		s.res.NoNetns = err.Error()
		s.say("No network namespace, so no requests in steps 5 and 6: %v", err)
		s.say("The client shows which pod member2's coredns-mcs sends it to instead.")
	} else {
		s.servers = &servers{ns: s.ns, running: map[string]*server{}}
		s.http = s.ns.httpClient()
		s.say("Inside a network namespace of the demo's own, each serve pod's address is bound on lo, with a server")
		s.say("answering as the seeds' serve image. For each request, a client in member2's place resolves")
		s.say("%s through member2's coredns-mcs, takes the answers in turn, and sends", nativeName)
		s.say("GET http://<address>:%d/ from inside the namespace (the pods' port: no kube-proxy here).", podPort)
	}
	fmt.Fprintln(s.w)
	s.res.Spread = s.requests(ctx, 3*time.Second, 200*time.Millisecond)
	return allFrom(member1, s.res.Spread)
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
			return fmt.Errorf("reply %q from %s: want every reply from %s", r.Text, r.Addr, cluster)
		}
	}
	return nil
}

func (s *story) localFirst(ctx context.Context) error {
	s.say("serve starts in member2 as well, in the namespace mcs-controller made there for the import, and the")
	s.say("MultiClusterService makes member2 a provider, with LocalFirst:")
	if err := s.kubectl(ctx, "--context", member2, "apply", "-f", "test/demo/manifests/serve.yaml"); err != nil {
		return err
	}
	if err := s.kubectl(ctx, "--context", hub, "-n", namespace, "patch", "multiclusterservice", "serve", "--type", "merge",
		"-p", `{"spec":{"strategy":"LocalFirst","serviceProvisionClusters":["member1","member2"]}}`); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "member2's serve pods are ready", time.Minute, func(ctx context.Context) error {
		return s.deploymentReady(ctx, member2, -1)
	}); err != nil {
		return err
	}
	if err := s.waitFor(ctx, "mcs-controller has converged", time.Minute, func(ctx context.Context) error {
		return s.clusters.converged(ctx, api.LocalFirst, member1, member2)
	}); err != nil {
		return err
	}
	local, err := s.clusters.readyIPs(ctx, member2)
	if err != nil {
		return err
	}
	if err := s.waitFor(ctx, "member2's coredns-mcs answers member2's own pods", 30*time.Second, s.answers(nativeName, local)); err != nil {
		return err
	}
	s.say("\nWhile member2 has a ready pod of its own, the native name answers member2's pods only:")
	if err := s.dig(ctx, member2, nativeName); err != nil {
		return err
	}
	fmt.Fprintln(s.w)
	s.res.Local = s.requests(ctx, 2*time.Second, 200*time.Millisecond)
	if err := allFrom(member2, s.res.Local); err != nil {
		return err
	}

	s.say("\nmember2's serve scaled to 0: LocalFirst answers member1's pods the moment member2 has no ready one.")
	s.say("Requests go on without pause; each change of who replies is shown, timed from the scale command:")
	if s.res.Failover, s.res.FailoverAfter, err = s.scaleMember2(ctx, 0, member1); err != nil {
		return err
	}
	if n := failures(s.res.Failover); n > 0 {
		s.say("    (%d requests failed in between: kwok removes a pod at once, before kube-controller-manager has", n)
		s.say("    taken its endpoint out of the slices; a real pod keeps serving while it terminates)")
	}
	s.say("\nScaled back: local again as soon as a member2 pod is ready:")
	s.res.Back, s.res.BackAfter, err = s.scaleMember2(ctx, 2, member2)
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
	s.say("\nMetrics: mcs-controller http://%s/metrics", s.controllerHTTP)
	for _, m := range members {
		s.say("         coredns-mcs of %s http://%s/metrics", m, s.coredns[m].metrics)
	}
	s.say("Logs:    %s/ (mcs-controller.log, coredns-mcs-<member>.log); the lab's in _output/lab/logs/", s.rel(filepath.Join(s.dir, "logs")))
	s.say("The servers of steps 5 and 6 lived in this program and its network namespace, and are gone.")
	s.say("\nStop everything, the lab included:\n\n  make lab-down")
	return nil
}
