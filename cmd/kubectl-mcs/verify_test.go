package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	kubefake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsfake "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned/fake"

	hubfake "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned/fake"
)

// A fleet for the plan: member1 and member2 provide, member2 and member3
// consume; member2 answers VIPs, member3 endpoints (its Corefile).
func planFleet() *observed {
	return &observed{
		namespace: "v", providers: []string{"member1", "member2"}, consumers: []string{"member2", "member3"},
		servers:   map[string][]string{"member1": {"10.10.0.5"}, "member2": {"10.12.0.5"}},
		localVIPs: map[string][]string{"member1": {"10.11.0.20"}, "member2": {"10.13.0.20"}},
		imports: map[string]map[string][]string{
			"member2": {verifyExported: {"10.13.100.1"}, verifyLocal: {"10.13.100.2"}, verifyHeadless: nil},
			"member3": {verifyExported: {"10.15.100.1"}, verifyLocal: {"10.15.100.2"}, verifyHeadless: nil},
		},
		answerVIPs: map[string]bool{"member2": true, "member3": false},
	}
}

// wantProbe fails unless ps has cluster's probe of check and name, wanting
// want.
func wantProbe(t *testing.T, ps []probe, cluster, check, name string, want ...string) {
	t.Helper()
	i := slices.IndexFunc(ps, func(p probe) bool { return p.cluster == cluster && p.check() == check && p.name == name })
	switch {
	case i < 0:
		t.Errorf("%s: no probe %s %s", cluster, check, name)
	case ps[i].problem != "":
		t.Errorf("%s %s %s: problem %q, want %v", cluster, check, name, ps[i].problem, want)
	case !slices.Equal(ps[i].want, want):
		t.Errorf("%s %s %s: want %v, plan says %v (%s)", cluster, check, name, want, ps[i].want, ps[i].about)
	}
}

func TestVerifyPlan(t *testing.T) {
	o := planFleet()
	ps := o.plan()
	set := func(svc string) string { return svc + ".v.svc.clusterset.local." }
	native := func(svc string) string { return svc + ".v.svc.cluster.local." }
	for c, vip := range map[string]string{"member2": "10.13.100.1", "member3": "10.15.100.1"} {
		wantProbe(t, ps, c, "dns A", set(verifyExported), vip)
		wantProbe(t, ps, c, "dns AAAA", set(verifyExported))
		wantProbe(t, ps, c, "dns SRV", "_echo._tcp."+set(verifyExported), set(verifyExported)+" 8080")
		wantProbe(t, ps, c, "connect", set(verifyExported), "member1", "member2")
		// RemoteAndLocal, headless: both providers by both names; each
		// pod by its own clusterset name, connected straight to it.
		wantProbe(t, ps, c, "dns A", native(verifyHeadless), "10.10.0.5", "10.12.0.5")
		wantProbe(t, ps, c, "dns A", set(verifyHeadless), "10.10.0.5", "10.12.0.5")
		for p, ip := range map[string]string{"member1": "10.10.0.5", "member2": "10.12.0.5"} {
			wantProbe(t, ps, c, "dns A", "mcs-verify-0."+p+"."+set(verifyHeadless), ip)
			wantProbe(t, ps, c, "connect", "mcs-verify-0."+p+"."+set(verifyHeadless), p)
		}
		wantProbe(t, ps, c, "dns SRV", "_echo._tcp."+set(verifyHeadless),
			"mcs-verify-0.member1."+set(verifyHeadless)+" 8080", "mcs-verify-0.member2."+set(verifyHeadless)+" 8080")
	}
	// member2 provides: LocalFirst answers its own VIP and connects to its
	// own server; its own pod alone has the per-pod native name.
	wantProbe(t, ps, "member2", "dns A", native(verifyLocal), "10.13.0.20")
	wantProbe(t, ps, "member2", "dns SRV", "_echo._tcp."+native(verifyLocal), native(verifyLocal)+" 8080")
	wantProbe(t, ps, "member2", "connect", native(verifyLocal), "member2")
	wantProbe(t, ps, "member2", "dns A", "mcs-verify-0."+native(verifyHeadless), "10.12.0.5")
	wantProbe(t, ps, "member2", "dns A", set(verifyLocal), "10.13.100.2")
	// member3 provides nothing and answers endpoints: the providers' pods.
	wantProbe(t, ps, "member3", "dns A", native(verifyLocal), "10.10.0.5", "10.12.0.5")
	wantProbe(t, ps, "member3", "dns SRV", "_echo._tcp."+native(verifyLocal),
		"10-10-0-5."+native(verifyLocal)+" 8080", "10-12-0-5."+native(verifyLocal)+" 8080")
	wantProbe(t, ps, "member3", "connect", native(verifyLocal), "member1", "member2")
	wantProbe(t, ps, "member3", "dns A", "mcs-verify-0."+native(verifyHeadless), "10.10.0.5", "10.12.0.5")

	// member2's server gone: the LocalFirst name fails over to the
	// import's VIP, which reaches member1.
	failover := o.withoutServer("member2").failoverPlan("member2")
	wantProbe(t, failover, "member2", "dns A", native(verifyLocal), "10.13.100.2")
	wantProbe(t, failover, "member2", "connect", native(verifyLocal), "member1")
	if len(failover) != 4 {
		t.Errorf("the failover plan: %d probes, want A, AAAA, SRV and a connection", len(failover))
	}
	if len(o.servers["member2"]) != 1 {
		t.Errorf("withoutServer changed the fleet it was given: %v", o.servers)
	}

	// No import: the probe fails as planned, saying so.
	delete(o.imports["member3"], verifyExported)
	i := slices.IndexFunc(o.plan(), func(p probe) bool { return p.cluster == "member3" && p.name == set(verifyExported) })
	if p := o.plan()[i]; !strings.Contains(p.problem, "no ServiceImport mcs-verify with IPs in member3") {
		t.Errorf("without the import: %+v", p)
	}
}

// digOutput is what dig +noall +comments +answer prints.
func digOutput(status string, records ...string) string {
	return ";; Got answer:\n;; ->>HEADER<<- opcode: QUERY, status: " + status + ", id: 4711\n;; flags: qr aa rd; QUERY: 1, ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1\n\n" +
		strings.Join(records, "\n") + "\n"
}

func TestDigRecords(t *testing.T) {
	got, err := digRecords(digOutput("NOERROR",
		"_echo._tcp.s.v.svc.clusterset.local. 5 IN SRV 0 50 8080 b.s.v.svc.clusterset.local.",
		"_echo._tcp.s.v.svc.clusterset.local. 5 IN SRV 0 50 8080 a.s.v.svc.clusterset.local."))
	if err != nil || !slices.Equal(got, []string{"a.s.v.svc.clusterset.local. 8080", "b.s.v.svc.clusterset.local. 8080"}) {
		t.Errorf("SRV: %v, %v", got, err)
	}
	if got, err := digRecords(digOutput("NOERROR")); err != nil || len(got) != 0 {
		t.Errorf("NODATA: %v, %v", got, err)
	}
	if _, err := digRecords(digOutput("NXDOMAIN")); err == nil || !strings.Contains(err.Error(), "NXDOMAIN") {
		t.Errorf("NXDOMAIN: %v", err)
	}
	if _, err := digRecords(";; connection timed out; no servers could be reached\n"); err == nil {
		t.Error("a timeout: no error")
	}
}

// fakeFleet is verify against fake clientsets: hub, member1 and member2
// provide, member2 consumes. A reactor plays the StatefulSet controller
// and kubelet (a ready pod of the server's replicas), another makes the
// client ready; the controller's imports are there; fakeDNS answers the
// client's dig and nc as a correct fleet would.
type fakeFleet struct {
	hub     *kubefake.Clientset
	hubMCS  *hubfake.Clientset
	kube    map[string]*kubefake.Clientset
	imports map[string]*mcsfake.Clientset
	run     *verifyRun

	mu      sync.Mutex
	execs   int
	podIP   map[string]string // member: its server pod's address, "" while at zero
	onExec  func()            // called on each exec
	answers map[string]string // name+" "+type: a wrong answer to give instead
}

func newFakeFleet(t *testing.T, objs ...runtime.Object) *fakeFleet {
	f := &fakeFleet{hub: kubefake.NewClientset(), hubMCS: hubfake.NewSimpleClientset(), kube: map[string]*kubefake.Clientset{}, imports: map[string]*mcsfake.Clientset{},
		podIP: map[string]string{}, answers: map[string]string{}}
	f.run = &verifyRun{namespace: "v", hub: f.hub, hubMCS: f.hubMCS, members: map[string]*verifyMember{},
		providers: []string{"member1", "member2"}, consumers: []string{"member2"},
		serverImage: "socat", clientImage: "netshoot", timeout: 2 * time.Second, poll: 10 * time.Millisecond}
	next := map[string]int{"member1": 5, "member2": 5}
	for i, m := range []string{"member1", "member2"} {
		kube := kubefake.NewClientset(objs...)
		kube.PrependReactor("*", "statefulsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
			replicas := -1
			switch a := a.(type) {
			case k8stesting.CreateAction:
				replicas = 1
			case k8stesting.PatchAction:
				replicas = int(bytes.Count(a.GetPatch(), []byte(`"replicas":1`)))
			}
			if replicas < 0 {
				return false, nil, nil
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			pods := kube.Tracker()
			_ = pods.Delete(corev1.SchemeGroupVersion.WithResource("pods"), "v", serverPod, metav1.DeleteOptions{})
			f.podIP[m] = ""
			if replicas == 1 {
				f.podIP[m] = fmt.Sprintf("10.%d.0.%d", 10+2*i, next[m])
				next[m]++
				_ = pods.Add(readyPod(serverPod, f.podIP[m], "server"))
			}
			return false, nil, nil
		})
		kube.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			p := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod)
			ready := readyPod(p.Name, "10.12.0.100", "client")
			ready.Labels = p.Labels
			return true, ready, kube.Tracker().Add(ready)
		})
		kube.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
			s := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
			if s.Spec.ClusterIP == "" {
				s.Spec.ClusterIPs = []string{fmt.Sprintf("10.%d.0.%d", 11+2*i, 20+len(s.Name))}
			}
			return false, nil, nil
		})
		mcs := mcsfake.NewSimpleClientset(
			serviceImport(verifyExported, "10.13.100.1"), serviceImport(verifyLocal, "10.13.100.2"), serviceImport(verifyHeadless, ""))
		f.kube[m], f.imports[m] = kube, mcs
		f.run.members[m] = &verifyMember{kube: kube, mcs: mcs}
	}
	f.run.exec = f.exec
	return f
}

func readyPod(name, ip, role string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: verifyMeta("v", name, component, role),
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func serviceImport(name, ip string) *mcsv1b1.ServiceImport {
	imp := &mcsv1b1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: "v", Name: name}, Spec: mcsv1b1.ServiceImportSpec{Type: mcsv1b1.ClusterSetIP}}
	if ip == "" {
		imp.Spec.Type = mcsv1b1.Headless
	} else {
		imp.Spec.IPs = []string{ip}
	}
	return imp
}

// exec answers as member2's cluster DNS and kube-proxy do on a correct
// fleet, written out here by hand rather than from the plan.
func (f *fakeFleet) exec(_ context.Context, cluster, ns, pod string, cmd []string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs++
	if f.onExec != nil {
		f.onExec()
	}
	if cluster != "member2" || ns != "v" || pod != verifyClient {
		return "", fmt.Errorf("exec in %s %s/%s", cluster, ns, pod)
	}
	m1, m2 := f.podIP["member1"], f.podIP["member2"]
	if cmd[0] == "/bin/sh" { // nc NAME 8080
		reached := map[string]string{
			"mcs-verify.v.svc.clusterset.local.":                               "member1",
			"mcs-verify-local.v.svc.cluster.local.":                            "member2",
			"mcs-verify-0.member1.mcs-verify-headless.v.svc.clusterset.local.": "member1",
			"mcs-verify-0.member2.mcs-verify-headless.v.svc.clusterset.local.": "member2",
		}
		words := strings.Fields(cmd[2])
		name := words[len(words)-2]
		c := cmp.Or(f.answers[name+" connect"], reached[name])
		if m2 == "" && c == "member2" {
			c = "member1"
		}
		return "mcs-verify " + c + " mcs-verify-0\n", nil
	}
	name, qtype := cmd[len(cmd)-2], cmd[len(cmd)-1]
	if a, ok := f.answers[name+" "+qtype]; ok {
		return digOutput("NOERROR", a), nil
	}
	local := "10.13.0.36" // member2's mcs-verify-local: 10.13.0.(20+len)
	if m2 == "" {
		local = "10.13.100.2"
	}
	pods := []string{m1}
	if m2 != "" {
		pods = append(pods, m2)
	}
	rec := func(typ string, values ...string) string {
		var out []string
		for _, v := range values {
			out = append(out, name+" 5 IN "+typ+" "+v)
		}
		return digOutput("NOERROR", out...)
	}
	switch name + " " + qtype {
	case "mcs-verify.v.svc.clusterset.local. A":
		return rec("A", "10.13.100.1"), nil
	case "_echo._tcp.mcs-verify.v.svc.clusterset.local. SRV":
		return rec("SRV", "0 100 8080 mcs-verify.v.svc.clusterset.local."), nil
	case "mcs-verify-local.v.svc.cluster.local. A":
		return rec("A", local), nil
	case "_echo._tcp.mcs-verify-local.v.svc.cluster.local. SRV":
		return rec("SRV", "0 100 8080 mcs-verify-local.v.svc.cluster.local."), nil
	case "mcs-verify-local.v.svc.clusterset.local. A":
		return rec("A", "10.13.100.2"), nil
	case "mcs-verify-headless.v.svc.cluster.local. A", "mcs-verify-headless.v.svc.clusterset.local. A":
		return rec("A", pods...), nil
	case "mcs-verify-0.mcs-verify-headless.v.svc.cluster.local. A":
		return rec("A", m2), nil
	case "mcs-verify-0.member1.mcs-verify-headless.v.svc.clusterset.local. A":
		return rec("A", m1), nil
	case "mcs-verify-0.member2.mcs-verify-headless.v.svc.clusterset.local. A":
		return rec("A", m2), nil
	case "_echo._tcp.mcs-verify-headless.v.svc.clusterset.local. SRV":
		return rec("SRV", "0 50 8080 mcs-verify-0.member1.mcs-verify-headless.v.svc.clusterset.local.", "0 50 8080 mcs-verify-0.member2.mcs-verify-headless.v.svc.clusterset.local."), nil
	}
	if qtype == dns.TypeToString[dns.TypeAAAA] {
		return digOutput("NOERROR"), nil
	}
	return digOutput("NXDOMAIN"), nil
}

// verify on a correct fake fleet passes every check, fails over and back,
// and leaves nothing of its label; a wrong answer fails its row, named.
func TestVerifyRun(t *testing.T) {
	f := newFakeFleet(t, users())
	v := f.run.verify(t.Context(), time.Second, &bytes.Buffer{})
	if v.Failed != 0 {
		t.Fatalf("%d failed: %+v", v.Failed, failed(v))
	}
	for _, want := range []string{"server ready", "client ready", "imported", "dns A", "dns AAAA", "dns SRV", "connect",
		"failover: server scaled to 0", "failover dns A", "failover connect", "failback: server ready again", "failback dns A", "failback connect", "cleanup"} {
		if !slices.ContainsFunc(v.Checks, func(c VerifyCheck) bool { return c.Check == want }) {
			t.Errorf("no check %q", want)
		}
	}
	f.noneLeft(t)

	f = newFakeFleet(t, users())
	f.answers["mcs-verify-0.member1.mcs-verify-headless.v.svc.clusterset.local. A"] = "x 5 IN A 10.99.0.1"
	f.answers["mcs-verify.v.svc.clusterset.local. connect"] = "member9"
	v = f.run.verify(t.Context(), time.Second, &bytes.Buffer{})
	got := failed(v)
	want := []string{
		"member2 dns A mcs-verify-0.member1.mcs-verify-headless.v.svc.clusterset.local.: after 2s: answers 10.99.0.1, want 10.10.0.5",
		"member2 connect mcs-verify.v.svc.clusterset.local.: after 2s: reached member9, want member1 or member2",
	}
	slices.Sort(got)
	slices.Sort(want)
	if v.Failed != 2 || !slices.Equal(got, want) {
		t.Errorf("failed %d: %q, want %q", v.Failed, got, want)
	}
	f.noneLeft(t)
}

func failed(v *Verification) []string {
	var out []string
	for _, c := range v.Checks {
		if !c.OK {
			out = append(out, c.Cluster+" "+c.Check+" "+c.Target+": "+c.Problem)
		}
	}
	return out
}

// users is a Service of the user's in verify's namespace: cleanup keeps it.
func users() *corev1.Service {
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "v", Name: "users"}}
}

// noneLeft fails unless no object of verify's label is left anywhere, and
// the user's own objects are.
func (f *fakeFleet) noneLeft(t *testing.T) {
	t.Helper()
	if left := f.run.leftovers(context.Background()); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}
	for m, kube := range f.kube {
		if _, err := kube.CoreV1().Services("v").Get(context.Background(), "users", metav1.GetOptions{}); err != nil {
			t.Errorf("%s: the user's Service: %v", m, err)
		}
	}
}

// Interrupted (Ctrl-C cancels the run's context) while it deploys, or
// while it probes, verify still deletes everything it made, with a
// context of its own, and what an earlier run left; a namespace of the
// user's and the user's objects stay.
func TestVerifyCleansUpAfterCancel(t *testing.T) {
	leftover := &appsv1.StatefulSet{ObjectMeta: verifyMeta("old", verifyServer)}
	for _, during := range []string{"deploy", "probes"} {
		t.Run(during, func(t *testing.T) {
			f := newFakeFleet(t, users(), leftover, &corev1.Namespace{ObjectMeta: verifyMeta("", "old")})
			// member1's namespace v is the user's: it must stay.
			if _, err := f.kube["member1"].CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "v"}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if during == "deploy" {
				f.kube["member2"].PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
					cancel()
					return false, nil, nil
				})
			} else {
				f.onExec = cancel
			}
			v := f.run.verify(ctx, time.Second, &bytes.Buffer{})
			if c := v.Checks[len(v.Checks)-1]; c.Check != "cleanup" || !c.OK {
				t.Errorf("the last check: %+v, want the cleanup, passed", c)
			}
			if during == "probes" && f.execs != 1 {
				t.Errorf("%d probes ran after the cancel, want none", f.execs-1)
			}
			f.noneLeft(t)
			if _, err := f.kube["member1"].CoreV1().Namespaces().Get(t.Context(), "v", metav1.GetOptions{}); err != nil {
				t.Errorf("the user's namespace in member1: %v", err)
			}
			if _, err := f.kube["member2"].CoreV1().Namespaces().Get(t.Context(), "v", metav1.GetOptions{}); err == nil {
				t.Error("verify's namespace in member2 is still there")
			}
		})
	}
}

func TestVerifyOutput(t *testing.T) {
	v := &Verification{Namespace: "v", Providers: []string{"member1"}, Consumers: []string{"member2"}}
	v.add(
		VerifyCheck{Cluster: "member1", Check: "server ready", Target: "v/mcs-verify-0", OK: true, Got: []string{"10.10.0.5"}},
		VerifyCheck{Cluster: "member2", Check: "dns A", Target: "mcs-verify.v.svc.clusterset.local.", Want: []string{"10.13.100.1"},
			About: "ServiceExport: the ServiceImport's IPs", Problem: "after 1m0s: answers NXDOMAIN"},
	)
	var table bytes.Buffer
	if err := v.table(&table); err != nil {
		t.Fatal(err)
	}
	want := `CLUSTER  CHECK         TARGET                              RESULT  GOT
member1  server ready  v/mcs-verify-0                      ok      10.10.0.5
member2  dns A         mcs-verify.v.svc.clusterset.local.  FAIL    -

1 of 2 checks failed:
  member2: dns A mcs-verify.v.svc.clusterset.local.: after 1m0s: answers NXDOMAIN
    expected: ServiceExport: the ServiceImport's IPs
`
	if table.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", table.String(), want)
	}

	var out bytes.Buffer
	o := &verifyOptions{statusOptions: statusOptions{output: "json"}}
	o.streams.Out = &out
	if err := o.print(v); err != nil {
		t.Fatal(err)
	}
	var back Verification
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.Failed != 1 || len(back.Checks) != 2 || back.Checks[1].Problem != v.Checks[1].Problem || back.Checks[0].OK != true {
		t.Errorf("JSON: %v\n%s", err, out.String())
	}
	for _, key := range []string{`"namespace": "v"`, `"providers"`, `"consumers"`, `"cluster": "member2"`, `"check": "dns A"`, `"want"`, `"about"`, `"ok": false`} {
		if !strings.Contains(out.String(), key) {
			t.Errorf("JSON without %s:\n%s", key, out.String())
		}
	}
}

func TestVerifyFlags(t *testing.T) {
	o := &verifyOptions{statusOptions: statusOptions{memberSources: memberSources{members: []string{"member2", "member1"}}, hubOptions: hubOptions{controllerNamespace: "mcs-system"}}}
	if got, err := o.among("--providers", nil); err != nil || !slices.Equal(got, []string{"member1", "member2"}) {
		t.Errorf("no --providers: %v, %v, want every member, sorted", got, err)
	}
	if _, err := o.among("--consumers", []string{"member1", "member9"}); err == nil || !strings.Contains(err.Error(), "--consumers: member9 is not a member (members: member2, member1)") {
		t.Errorf("an unknown consumer: %v", err)
	}
	o.members = nil
	if _, err := o.among("--providers", nil); err == nil || !strings.Contains(err.Error(), "no members (none on the hub in --controller-namespace mcs-system") {
		t.Errorf("no members: %v", err)
	}
	var out bytes.Buffer
	root := newRoot(genericiooptions.IOStreams{Out: &out, ErrOut: &out})
	root.SetArgs([]string{"verify", "-o", "yaml"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "-o yaml: json") {
		t.Errorf("-o yaml: %v", err)
	}
}

// A try the timeout cut short says only that; the whole try before it
// says why the wait failed.
func TestVerifyKeepsTheLastWholeTry(t *testing.T) {
	whole, cut := fmt.Errorf("0 pods, want 1"), context.DeadlineExceeded
	done, cancel := context.WithCancel(t.Context())
	cancel()
	// a client gives up before the deadline it cannot make
	closing, cancelClosing := context.WithTimeout(t.Context(), time.Second/2)
	defer cancelClosing()
	later, cancelLater := context.WithTimeout(t.Context(), time.Hour)
	defer cancelLater()
	for _, c := range []struct {
		ctx       context.Context
		last, err error
		want      error
	}{
		{done, whole, cut, whole},
		{done, nil, cut, cut},
		{closing, whole, cut, whole},
		{later, whole, cut, cut},
		{t.Context(), whole, cut, cut},
		{done, whole, nil, nil},
	} {
		if got := keep(c.ctx, c.last, c.err); got != c.want {
			t.Errorf("keep(ctx done %t, %v, %v) = %v, want %v", c.ctx.Err() != nil, c.last, c.err, got, c.want)
		}
	}
}
