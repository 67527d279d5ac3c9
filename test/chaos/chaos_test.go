//go:build lab

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
	"github.com/coredns-mcs/coredns-mcs/test/labnet"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

func TestMain(m *testing.M) {
	// The owned invariant reads the API servers' audit logs: the lab this
	// binary starts keeps them.
	os.Setenv(labtest.Audit, "1")
	labtest.Main(m)
}

// The run's settings, from the environment make chaos passes on; unset
// there, a fixed seed and three minutes.
const (
	defaultSeed     = 47
	defaultDuration = 3 * time.Minute
	services        = 20
)

// ciDuration is each of make test's two runs (CHAOS_SEED not in the
// environment): the fixed seed and a random one, short enough that both,
// with their set-up, take about five minutes.
const ciDuration = 2 * time.Minute

// Short Leases (as test/e2e's fault tests use), so that a lost provider
// turns stale and a killed leader is replaced in seconds.
var controllerTiming = []string{
	"--source-lease-duration", "6s", "--source-lease-renew", "2s",
	"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "500ms",
	"--probe-interval", "1s",
}

var limits = Limits{Settle: 5 * time.Second, Grace: 15 * time.Second, Converge: 30 * time.Second}

// missing is what this version of the run does not cover yet; the report
// lists it, so that no reader takes the numbers for more than they are.
var missing = []string{
	"connections through kube-proxy: probes resolve names, they do not connect",
}

func config(t *testing.T) Config {
	cfg := Config{Seed: defaultSeed, Duration: defaultDuration, Rate: 3, FaultGap: 10 * time.Second, Quiet: 40 * time.Second}
	var err error
	switch s := os.Getenv("CHAOS_SEED"); s {
	case "":
	case "random":
		cfg.Seed = rand.Uint64N(1_000_000)
	default:
		if cfg.Seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SEED %q: %v", s, err)
		}
	}
	if s := os.Getenv("CHAOS_DURATION"); s != "" {
		if cfg.Duration, err = time.ParseDuration(s); err != nil {
			t.Fatalf("DURATION %q: %v", s, err)
		}
	}
	if cfg.Faults, err = ParseFaults(os.Getenv("CHAOS_FAULTS")); err != nil {
		t.Fatal(err)
	}
	if s := os.Getenv("CHAOS_SHARDS"); s != "" {
		if cfg.Shards, err = strconv.Atoi(s); err != nil || shards.Valid(cfg.Shards) != nil {
			t.Fatalf("SHARDS %q: want 1 to 64, the controllers' --shards", s)
		}
	}
	if cfg.Duration <= cfg.Quiet {
		t.Fatalf("DURATION %s must be longer than the quiet end %s", cfg.Duration, cfg.Quiet)
	}
	return cfg
}

// configs are the runs to make: the one make chaos asks for, or without
// CHAOS_SEED in the environment (make test) the fixed seed and a random
// one, each ciDuration with every fault kind.
func configs(t *testing.T) []Config {
	if _, set := os.LookupEnv("CHAOS_SEED"); set {
		return []Config{config(t)}
	}
	fixed, random := config(t), config(t)
	fixed.Duration, random.Duration = ciDuration, ciDuration
	fixed.Faults, random.Faults = slices.Clone(FaultKinds), slices.Clone(FaultKinds)
	random.Seed = rand.Uint64N(1_000_000)
	return []Config{fixed, random}
}

func TestChaos(t *testing.T) {
	for _, cfg := range configs(t) {
		t.Run(fmt.Sprintf("seed-%d", cfg.Seed), func(t *testing.T) { chaos(t, cfg) })
	}
}

// chaos makes one run of cfg and fails on any violation, printing its seed
// and what the run did before the first ones.
func chaos(t *testing.T, cfg Config) {
	w := NewWorld(services)
	schedule := Plan(cfg, w)
	t.Logf("chaos: seed %d, %s, %d events; replay with SEED=%d DURATION=%s make chaos", cfg.Seed, cfg.Duration, len(schedule), cfg.Seed, cfg.Duration)

	l := labtest.Get(t)
	started := time.Now()
	from := started // the owned invariant checks the controller's writes from set-up on
	dir := filepath.Join(l.Root(), "_output", "chaos", fmt.Sprintf("%d-%s", cfg.Seed, started.UTC().Format("20060102T150405")))
	if err := writeSchedule(dir, schedule); err != nil {
		t.Fatal(err)
	}
	r := setUp(t, l, w, cfg.Shards)
	shipped := memLimits(t, l, w)
	r.waitConverged(t, 3*time.Minute)

	started = time.Now()
	r.start = started
	ctx, stop := context.WithCancel(t.Context())
	var bg sync.WaitGroup
	bg.Go(func() { r.sampleLoop(ctx) })
	for _, c := range members {
		bg.Go(func() { r.probeLoop(ctx, c) })
	}
	bg.Go(func() { r.supervise(ctx) })
	bg.Go(func() { r.memLoop(ctx) })

	var acts sync.WaitGroup
	for _, e := range schedule {
		time.Sleep(time.Until(started.Add(e.At)))
		acts.Go(func() { r.apply(t, e) })
	}
	acts.Wait()
	// The quiet end's last stretch, once the fleet has had Converge to
	// match: the controller's writes then are lean's.
	window := cfg.Quiet - limits.Converge
	time.Sleep(time.Until(started.Add(cfg.Duration - window)))
	before := r.writes(ctx)
	time.Sleep(time.Until(started.Add(cfg.Duration)))
	after := r.writes(ctx)
	to := time.Now()
	stop()
	bg.Wait()

	panics := r.collectLogs(t, l, dir)
	res := Check(w, limits, r.samples, r.probes, r.applied, r.exits, panics)
	res.Lean(before, after, window, cfg.Duration)
	res.Owned(auditLogs(t, l, w.APIClusters, dir), w.APIClusters, from, started, to)
	res.LeanMemory(r.mem, shipped, cfg.Duration)
	gaps := missing
	if cfg.Shards <= 1 {
		gaps = append(slices.Clone(missing), "one controller shard: SHARDS=2 make chaos runs the controller with --shards")
	}
	rep := Report{Config: cfg, Limits: limits, World: w, Started: started, Ran: time.Since(started), Result: res, Missing: gaps, Schedule: schedule}
	if err := rep.Write(dir, r.applied, r.probes, r.samples); err != nil {
		t.Fatal(err)
	}
	if err := writeLines(filepath.Join(dir, "memory.jsonl"), r.mem); err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos: report in %s\n%s", dir, rep.Markdown())
	for i, v := range res.Violations {
		if i == 20 {
			t.Errorf("%d violations more in %s", len(res.Violations)-20, dir)
			break
		}
		t.Errorf("seed %d: %s at %s: %s %s: %s (last fault: %s)", cfg.Seed, v.Invariant, v.At.Round(time.Millisecond), v.Service, v.Consumer, v.Detail, v.LastFault)
		if i < 3 {
			t.Logf("what the run did from 20 s before to 2 s after:\n%s", HistoryAround(r.applied, v.At, 20*time.Second, 2*time.Second))
		}
	}
}

// run is the state of one chaos run: the fleet's processes and the
// history recorded so far.
type run struct {
	t       *testing.T
	l       *labtest.Lab
	w       World
	ns      string
	start   time.Time
	ctlArgs []string
	ctlBin  string
	shards  int
	dnsAddr map[string]string            // consumer -> its cluster DNS
	procDNS *labtest.MemberDNS           // member3's coredns-mcs, a process beside the lab
	proxies map[string]*labtest.APIProxy // member -> the controllers' way to its API server
	own     string                       // the controllers' namespace on the hub, with the member Secrets
	mcsBin  string                       // kubectl mcs

	// servers holds a cluster while a server fault is under way there, its
	// healing (a start that waits for readiness) included, or a membership
	// fault (join and unjoin write there): a fault the schedule starts
	// meanwhile is not injected, since a server stopped while another one
	// of its cluster starts up may never come back.
	servers sync.Map // cluster -> *sync.Mutex

	mu       sync.Mutex
	replicas []*replica
	killed   map[*replica]bool
	samples  []Sample
	probes   []Probe
	applied  []Applied
	exits    []Exit
	logs     []string
	mem      []MemSample
}

type replica struct {
	p    *process.Process
	addr string
}

func (r *run) now() time.Duration { return time.Since(r.start) }

// setUp makes the world: the namespace everywhere, every service's
// Deployment and Service in its providers, its ServiceExports or its
// MultiClusterService, coredns-mcs as the members' DNS, every member
// joined (kubectl mcs join, through a proxy a partition cuts) and the
// controller's replicas with leader election (replicasFor), with --shards
// when n > 1.
func setUp(t *testing.T, l *labtest.Lab, w World, n int) *run {
	l.Network(t)
	l.InstallCRDs(t)
	ns := l.Namespace(t)
	own := ns + "-mcs"
	l.NamedNamespace(t, own, labtest.Hub)
	r := &run{t: t, l: l, w: w, ns: ns, own: own, shards: max(n, 1), killed: map[*replica]bool{}, dnsAddr: map[string]string{},
		proxies: map[string]*labtest.APIProxy{}, mcsBin: l.Binary(t, "kubectl-mcs")}
	for _, s := range w.Services {
		for _, p := range s.Providers {
			l.Apply(t, p, labtest.Deployment(ns, s.Name, 2), labtest.Service(ns, s.Name, s.Headless))
			if !s.MCS {
				l.Apply(t, p, labtest.ServiceExport(ns, s.Name))
			}
		}
		if s.MCS {
			// Not ApplyMultiClusterService: its cleanup needs a live
			// controller, and the run may end with none of the first
			// replicas; the hub namespace's cleanup drops finalizers.
			l.Apply(t, hub, multiClusterService(ns, s))
		}
	}
	labtest.ClusterDNS(t, w.PodDNS...)
	for _, c := range w.PodDNS {
		r.dnsAddr[c] = net.JoinHostPort(l.DNSServiceIP(t, c), "53")
	}
	r.procDNS = labtest.RunMemberDNS(t, l.Binary(t, "coredns-mcs"), l.Kubeconfig(), member3, time.Minute)
	r.dnsAddr[member3], r.logs = r.procDNS.Addr, append(r.logs, r.procDNS.Log())
	dropTable(t)
	for _, m := range members {
		r.proxies[m], _ = l.APIProxy(t, m)
		r.proxies[m].Up(t)
	}
	r.joinAll(t)
	r.ctlBin = l.Binary(t, "mcs-controller")
	r.ctlArgs = append([]string{"--kubeconfig", l.KubeconfigOf(t, labtest.Hub),
		"--namespace", own, "--watch-namespaces", ns, "--shards", strconv.Itoa(r.shards)}, controllerTiming...)
	for range replicasFor(r.shards) {
		r.startReplica()
	}
	return r
}

func multiClusterService(ns string, s Service) *v1alpha1.MultiClusterService {
	var prov, cons []v1alpha1.ClusterName
	for _, p := range s.Providers {
		prov = append(prov, v1alpha1.ClusterName(p))
	}
	if len(s.Consumers) < len(members) {
		for _, c := range s.Consumers {
			cons = append(cons, v1alpha1.ClusterName(c))
		}
	}
	m := labtest.MultiClusterService(ns, s.Name, s.Strategy, prov, cons)
	if s.LocalFirstPolicy {
		m.Spec.LocalFirst = &v1alpha1.LocalFirstPolicy{MinReadyEndpoints: ptr.To(int32(2))}
		for _, c := range failoverOrder {
			m.Spec.LocalFirst.FailoverOrder = append(m.Spec.LocalFirst.FailoverOrder, v1alpha1.ClusterName(c))
		}
	}
	return m
}

// startReplica starts a controller replica, as a Deployment's kubelet does.
func (r *run) startReplica() {
	p, addr := labtest.StartController(r.t, r.ctlBin, r.ctlArgs...)
	r.mu.Lock()
	r.replicas = append(r.replicas, &replica{p: p, addr: addr})
	r.logs = append(r.logs, p.Log())
	r.mu.Unlock()
}

// supervise restarts a replica that exited, as a kubelet would, and
// records the exit: injected when the harness killed it.
func (r *run) supervise(ctx context.Context) {
	for ctx.Err() == nil {
		r.mu.Lock()
		var gone []*replica
		r.replicas = slices.DeleteFunc(r.replicas, func(rp *replica) bool {
			if rp.p.Alive() != nil {
				gone = append(gone, rp)
				return true
			}
			return false
		})
		for _, rp := range gone {
			if !r.killed[rp] {
				r.exits = append(r.exits, Exit{At: r.now(), Process: "mcs-controller", Detail: lastLines(rp.p.Output(), 3)})
			}
		}
		r.mu.Unlock()
		for range gone {
			r.startReplica()
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " / ")
}

// waitConverged waits until a sample matches the model everywhere: the
// run starts from a converged fleet.
func (r *run) waitConverged(t *testing.T, timeout time.Duration) {
	labtest.Eventually(t, timeout, func(ctx context.Context) error {
		m := r.sample(ctx, Sample{})
		for _, s := range r.w.Services {
			for _, c := range members {
				if bad := m.Mismatch(s, c); bad != "" {
					return fmt.Errorf("%s in %s: %s", s.Name, c, bad)
				}
			}
		}
		return nil
	})
}

func (r *run) sampleLoop(ctx context.Context) {
	var prev Sample
	for ctx.Err() == nil {
		m := r.sample(ctx, prev)
		r.mu.Lock()
		r.samples = append(r.samples, m)
		r.mu.Unlock()
		prev = m
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

const managedBySlices = "endpointslice.kubernetes.io/managed-by"

// sample reads every cluster; one that does not answer within two seconds
// keeps what prev read of it.
func (r *run) sample(ctx context.Context, prev Sample) Sample {
	m := newSample(r.now())
	// Each cluster in parallel: one that hangs must not slow the
	// readings of the others.
	parts := make([]Sample, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, c := range members {
		parts[i] = newSample(m.At)
		wg.Go(func() { errs[i] = r.readMember(ctx, c, &parts[i]) })
	}
	err := r.readHub(ctx, &m)
	wg.Wait()
	for i, c := range members {
		m.Up[c] = errs[i] == nil
		from := parts[i]
		if errs[i] != nil {
			from = prev
		}
		copyMember(&m, from, c)
	}
	m.Up[hub] = err == nil
	if err != nil {
		m.MCS, m.Provision, m.Consumption, m.Away = prev.MCS, prev.Provision, prev.Consumption, prev.Away
	}
	return m
}

func (r *run) readHub(ctx context.Context, m *Sample) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	list, err := r.l.Dynamic(r.t, hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, it := range list.Items {
		if it.GetDeletionTimestamp() != nil {
			continue
		}
		name := it.GetName()
		m.MCS[name] = true
		m.Provision[name], _, _ = unstructured.NestedStringSlice(it.Object, "spec", "serviceProvisionClusters")
		m.Consumption[name], _, _ = unstructured.NestedStringSlice(it.Object, "spec", "serviceConsumptionClusters")
	}
	return r.readAway(ctx, m)
}

// readMember reads c's own EndpointSlices, ServiceExports, ServiceImports
// and imported slices into m.
func (r *run) readMember(ctx context.Context, c string, m *Sample) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	slices_, err := r.l.Client(r.t, c).DiscoveryV1().EndpointSlices(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	exports, err := r.l.Dynamic(r.t, c).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	imports, err := r.l.Dynamic(r.t, c).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	// What is being deleted counts as gone: a finalizer may hold it a while.
	for _, e := range exports.Items {
		if e.GetDeletionTimestamp() != nil {
			continue
		}
		m.Exports[e.GetName()] = append(m.Exports[e.GetName()], c)
	}
	for _, i := range imports.Items {
		if i.GetDeletionTimestamp() != nil {
			continue
		}
		m.Imports[c] = append(m.Imports[c], i.GetName())
	}
	m.Imported[c] = map[string]map[string][]string{}
	for _, s := range slices_.Items {
		var all, ready []string
		for _, ep := range s.Endpoints {
			all = append(all, ep.Addresses...)
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				ready = append(ready, ep.Addresses...)
			}
		}
		if s.Labels[managedBySlices] == api.ManagedBy {
			svc, src := s.Labels[mcsv1beta1.LabelServiceName], s.Labels[mcsv1beta1.LabelSourceCluster]
			if m.Imported[c][svc] == nil {
				m.Imported[c][svc] = map[string][]string{}
			}
			m.Imported[c][svc][src] = append(m.Imported[c][svc][src], all...)
			continue
		}
		svc := s.Labels[discoveryv1.LabelServiceName]
		if m.All[svc] == nil {
			m.All[svc], m.Ready[svc] = map[string][]string{}, map[string][]string{}
		}
		m.All[svc][c] = append(m.All[svc][c], all...)
		m.Ready[svc][c] = append(m.Ready[svc][c], ready...)
	}
	return nil
}

func newSample(at time.Duration) Sample {
	return Sample{At: at, Up: map[string]bool{}, Ready: map[string]map[string][]string{}, All: map[string]map[string][]string{},
		Exports: map[string][]string{}, MCS: map[string]bool{}, Provision: map[string][]string{}, Consumption: map[string][]string{}, Imports: map[string][]string{}, Imported: map[string]map[string]map[string][]string{}}
}

// copyMember carries what src read of member c into m.
func copyMember(m *Sample, src Sample, c string) {
	for svc, byC := range src.All {
		if m.All[svc] == nil {
			m.All[svc], m.Ready[svc] = map[string][]string{}, map[string][]string{}
		}
		m.All[svc][c], m.Ready[svc][c] = byC[c], src.Ready[svc][c]
	}
	for svc, cs := range src.Exports {
		if slices.Contains(cs, c) {
			m.Exports[svc] = append(m.Exports[svc], c)
		}
	}
	m.Imports[c], m.Imported[c] = src.Imports[c], src.Imported[c]
}

// probeLoop resolves every service's names through member c's DNS, about
// once a second each, and records every answer: in every member, since
// consumption lists change during the run; the model says where a name
// must answer.
func (r *run) probeLoop(ctx context.Context, c string) {
	for ctx.Err() == nil {
		round := time.Now()
		for _, s := range r.w.Services {
			names := map[string]string{"clusterset": fmt.Sprintf("%s.%s.svc.clusterset.local.", s.Name, r.ns)}
			if s.MCS { // the native name is mcs's only with a MultiClusterService's strategy
				names["native"] = fmt.Sprintf("%s.%s.svc.cluster.local.", s.Name, r.ns)
			}
			for _, kind := range []string{"clusterset", "native"} {
				if name, ok := names[kind]; ok {
					p := r.resolve(ctx, c, name)
					p.Service, p.Name = s.Name, kind
					r.mu.Lock()
					r.probes = append(r.probes, p)
					r.mu.Unlock()
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(round.Add(time.Second))):
		}
	}
}

// resolve asks c's cluster DNS for name's addresses as a pod of c would:
// through kube-dns's VIP from c's node (kube-proxy), or, for member3, at
// its coredns-mcs process.
func (r *run) resolve(ctx context.Context, c, name string) Probe {
	p := Probe{At: r.now(), Consumer: c}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var conn net.Conn
	var err error
	if slices.Contains(r.w.PodDNS, c) {
		conn, err = labnet.Node(c).Dial(ctx, "udp", r.dnsAddr[c])
	} else {
		conn, err = (&net.Dialer{}).DialContext(ctx, "udp", r.dnsAddr[c])
	}
	if err != nil {
		p.Err = err.Error()
		return p
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	dc := &dns.Conn{Conn: conn}
	if err := dc.WriteMsg(new(dns.Msg).SetQuestion(name, dns.TypeA)); err != nil {
		p.Err = err.Error()
		return p
	}
	resp, err := dc.ReadMsg()
	if err != nil {
		p.Err = err.Error()
		return p
	}
	p.Rcode = dns.RcodeToString[resp.Rcode]
	for _, rr := range resp.Answer {
		if _, ok := rr.(*dns.A); ok {
			p.Answers++
		}
	}
	return p
}

// apply carries out event e and records it.
func (r *run) apply(t *testing.T, e Event) {
	a := Applied{Event: e, Start: r.now()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var err error
	switch e.Kind {
	case FreezeAPI, StopAPI, FreezeEtcd, StopEtcd, RevokeToken, Rejoin:
		mu, _ := r.servers.LoadOrStore(e.Cluster, new(sync.Mutex))
		if !mu.(*sync.Mutex).TryLock() {
			err = fmt.Errorf("a server or membership fault of %s is still under way or healing", e.Cluster)
			break
		}
		defer mu.(*sync.Mutex).Unlock()
		if e.Kind == RevokeToken || e.Kind == Rejoin {
			err = r.membershipFault(t, e)
			break
		}
		r.serverFault(t, e)
	case Scale:
		_, err = r.l.Client(t, e.Cluster).AppsV1().Deployments(r.ns).Patch(ctx, e.Service, types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, e.Replicas), metav1.PatchOptions{})
	case ToggleExport:
		err = r.toggleExport(ctx, e)
	case FlipStrategy:
		err = r.flipStrategy(ctx, e)
	case Roll:
		err = r.roll(ctx, e)
	case SetProvision:
		err = r.setList(ctx, e, "serviceProvisionClusters")
	case SetConsumption:
		err = r.setList(ctx, e, "serviceConsumptionClusters")
	case RecreateMCS:
		err = r.recreateMCS(ctx, e)
	case Partition:
		err = r.partition(t, e)
	case KillLeader:
		err = r.killLeader(ctx, e)
	case KillCoreDNS:
		err = r.killCoreDNS(ctx, e.Cluster)
	case DeleteOwned:
		err = r.deleteOwned(ctx, e)
	case EditOwned:
		err = r.editOwned(ctx, e)
	}
	a.Heal = r.now()
	if err != nil {
		a.Err = err.Error()
	}
	r.mu.Lock()
	r.applied = append(r.applied, a)
	r.mu.Unlock()
}

// serverFault freezes or stops a server of the event's cluster for the
// event's time.
func (r *run) serverFault(t *testing.T, e Event) {
	component := "kube-apiserver"
	if e.Kind == FreezeEtcd || e.Kind == StopEtcd {
		component = "etcd"
	}
	heal := r.l.Freeze
	if e.Kind == StopAPI || e.Kind == StopEtcd {
		heal = r.l.Stop
	}
	undo := heal(t, e.Cluster, component)
	time.Sleep(e.For)
	undo()
}

func (r *run) toggleExport(ctx context.Context, e Event) error {
	res := r.l.Dynamic(r.t, e.Cluster).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceexports")).Namespace(r.ns)
	_, err := res.Get(ctx, e.Service, metav1.GetOptions{})
	switch {
	case err == nil:
		return res.Delete(ctx, e.Service, metav1.DeleteOptions{})
	case !apierrors.IsNotFound(err):
		return err
	}
	se := map[string]any{"apiVersion": mcsv1beta1.SchemeGroupVersion.String(), "kind": "ServiceExport",
		"metadata": map[string]any{"name": e.Service, "namespace": r.ns}}
	b, _ := json.Marshal(se)
	_, err = res.Patch(ctx, e.Service, types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "chaos"})
	return err
}

func (r *run) flipStrategy(ctx context.Context, e Event) error {
	res := r.l.Dynamic(r.t, hub).Resource(v1alpha1.MultiClusterServiceResource).Namespace(r.ns)
	m, err := res.Get(ctx, e.Service, metav1.GetOptions{})
	if err != nil {
		return err
	}
	s, _, _ := unstructured.NestedString(m.Object, "spec", "strategy")
	next := api.LocalFirst
	if s == string(api.LocalFirst) {
		next = api.RemoteAndLocal
	}
	_, err = res.Patch(ctx, e.Service, types.MergePatchType, fmt.Appendf(nil, `{"spec":{"strategy":%q}}`, next), metav1.PatchOptions{})
	return err
}

// writes are each live replica's writes other than Leases', by its
// address; a replica that does not answer is left out.
func (r *run) writes(ctx context.Context) map[string]map[string]float64 {
	r.mu.Lock()
	reps := slices.Clone(r.replicas)
	r.mu.Unlock()
	out := map[string]map[string]float64{}
	for _, rp := range reps {
		if f, err := process.Scrape(ctx, "http://"+rp.addr+"/metrics"); err == nil {
			out[rp.addr] = Writes(f)
		}
	}
	return out
}

// killLeader SIGKILLs the replica that leads, with shards the holder of
// the shard the event's time names (victim), and starts another at once.
func (r *run) killLeader(ctx context.Context, e Event) error {
	r.mu.Lock()
	reps := slices.Clone(r.replicas)
	r.mu.Unlock()
	held := make([][]string, len(reps))
	for i, rp := range reps {
		if _, body, err := process.HTTPGet(ctx, "http://"+rp.addr+"/metrics"); err == nil {
			held[i] = heldLeases(body)
		}
	}
	i := victim(held, shards.LeaseName(int(e.At/time.Millisecond)%r.shards, r.shards))
	if i < 0 {
		return errors.New("no replica leads")
	}
	r.mu.Lock()
	r.killed[reps[i]] = true
	r.exits = append(r.exits, Exit{At: r.now(), Process: "mcs-controller", Injected: true})
	r.mu.Unlock()
	reps[i].p.Kill()
	return nil
}

// killCoreDNS deletes the first CoreDNS pod of c at once, as a node lost;
// member3's coredns-mcs, a process, it SIGKILLs and starts again, as a
// kubelet restarts a container that died.
func (r *run) killCoreDNS(ctx context.Context, c string) error {
	if !slices.Contains(r.w.PodDNS, c) {
		err := r.procDNS.Restart(r.t, time.Minute)
		r.mu.Lock()
		r.logs = append(r.logs, r.procDNS.Log())
		r.mu.Unlock()
		return err
	}
	pods, err := r.l.Client(r.t, c).CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return errors.New("no CoreDNS pod")
	}
	slices.SortFunc(pods.Items, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return r.l.Client(r.t, c).CoreV1().Pods("kube-system").Delete(ctx, pods.Items[0].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))})
}

// deleteOwned deletes, by the event's time, the ServiceImport, the derived
// Service or the imported slices of the service in the cluster.
func (r *run) deleteOwned(ctx context.Context, e Event) error {
	c := r.l.Client(r.t, e.Cluster)
	switch int(e.At/time.Millisecond) % 3 {
	case 0:
		return r.l.Dynamic(r.t, e.Cluster).Resource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Namespace(r.ns).Delete(ctx, e.Service, metav1.DeleteOptions{})
	case 1:
		return c.CoreV1().Services(r.ns).Delete(ctx, "derived-"+e.Service, metav1.DeleteOptions{})
	}
	return c.DiscoveryV1().EndpointSlices(r.ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + e.Service + "," + managedBySlices + "=" + api.ManagedBy})
}

// editOwned gives an imported slice of the service in the cluster an
// address no provider has.
func (r *run) editOwned(ctx context.Context, e Event) error {
	c := r.l.Client(r.t, e.Cluster).DiscoveryV1().EndpointSlices(r.ns)
	list, err := c.List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName + "=" + e.Service + "," + managedBySlices + "=" + api.ManagedBy})
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return errors.New("no imported slice")
	}
	s := list.Items[0]
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.99.99.99"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}
	_, err = c.Update(ctx, &s, metav1.UpdateOptions{})
	return err
}

// collectLogs copies the controllers' and coredns-mcs's logs into dir and
// returns each line that says a process panicked.
func (r *run) collectLogs(t *testing.T, l *labtest.Lab, dir string) []string {
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	logs := slices.Clone(r.logs)
	r.mu.Unlock()
	pods, _ := filepath.Glob(filepath.Join(l.Root(), "_output", "lab", "pods", "kube-system_coredns-*", "*.log"))
	logs = append(logs, pods...)
	var panics []string
	for i, path := range logs {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Log(err)
			continue
		}
		name := fmt.Sprintf("%02d-%s", i, filepath.Base(filepath.Dir(path))+"-"+filepath.Base(path))
		if err := os.WriteFile(filepath.Join(dir, "logs", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
				panics = append(panics, name+": "+line)
			}
		}
	}
	return panics
}
