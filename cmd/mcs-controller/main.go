// Command mcs-controller runs on the hub cluster: it syncs multi-cluster
// services from provision clusters into consumption clusters (see
// controller/README.md for what it writes, its flags and its metrics).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // -logging-format=json
	"k8s.io/component-base/metrics/legacyregistry"
	_ "k8s.io/component-base/metrics/prometheus/clientgo/leaderelection" // leader election metrics
	_ "k8s.io/component-base/metrics/prometheus/restclient"              // rest_client metrics
	_ "k8s.io/component-base/metrics/prometheus/workqueue"               // workqueue metrics
	"k8s.io/klog/v2"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	inventoryclient "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsclient "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
	"github.com/coredns-mcs/coredns-mcs/controller"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
	"github.com/coredns-mcs/coredns-mcs/controller/leases"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// version is set at link time (-ldflags -X main.version=…), make build and
// make images to $(VERSION) (Makefile).
var version = "dev"

type flags struct {
	kubeconfig, clustersKubeconfig, namespace, httpAddress string
	watchNamespaces                                        string
	profileNamespace, profileProviderFile                  string
	workers, maxObjects, maxMiB, memberInFlight, shards    int
	maxExports, maxShards                                  int
	qps, changeRate                                        float64
	burst, maxImportedEndpoints                            int
	maxImportedPorts, memberMaxEndpoints                   int
	leaderElect, allowInsecureMemberTLS                    bool
	leaseDuration, renewDeadline, retryPeriod              time.Duration
	sourceLeaseDuration, sourceLeaseRenew, probeInterval   time.Duration
	renewCredentialsBefore, credentialDuration             time.Duration
	showVersion, profiling                                 bool
	createNamespaces                                       bool
	allowExport, protected                                 []string
	exportNamespaces                                       map[string][]string
	defaultExports                                         controller.DefaultExports
	logging                                                *logsapi.LoggingConfiguration
}

func parseFlags() *flags {
	f := &flags{exportNamespaces: map[string][]string{}, logging: logsapi.NewLoggingConfiguration()}
	fs := flag.CommandLine
	// Kubernetes components' logging flags: -v, -vmodule, -logging-format
	// (text, or json for log pipelines), -log-flush-frequency.
	logsapi.AddGoFlags(f.logging, fs)
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig of the hub cluster; in-cluster config when empty")
	fs.StringVar(&f.clustersKubeconfig, "clusters-kubeconfig", "", "kubeconfig whose contexts are the member clusters, each named after its context")
	fs.BoolVar(&f.allowInsecureMemberTLS, "allow-insecure-member-tls", false, "accept member Secrets whose kubeconfig, and ClusterProfiles whose access provider, skips verifying the member's server (insecure-skip-tls-verify) or reaches it other than by https")
	fs.StringVar(&f.profileNamespace, "cluster-profile-namespace", "", "namespace of the hub whose ClusterProfiles (Cluster Inventory API) register a member each, named after the profile, beside the member Secrets; needs --cluster-profile-provider-file. Empty: ClusterProfiles are not read")
	fs.StringVar(&f.profileProviderFile, "cluster-profile-provider-file", "", "the operator's access-provider file (KEP-5339's JSON, as the Cluster Inventory API's pkg/access reads it): the exec plugins that get the credentials of the members of --cluster-profile-namespace")
	fs.StringVar(&f.namespace, "namespace", envOr("POD_NAMESPACE", "mcs-system"), "the controller's namespace on the hub: member Secrets and the leader-election Lease")
	fs.StringVar(&f.watchNamespaces, "watch-namespaces", "", "comma-separated namespaces whose services are synced; empty: all")
	fs.StringVar(&f.httpAddress, "http-address", ":8080", "address of /healthz, /readyz and /metrics")
	fs.IntVar(&f.maxMiB, "member-max-mib", 192, "MiB the objects the controller holds of one member may take, counted as decoded (their encoded bytes, about 600 an object in a real fleet; packed they take less), with the initial events of its watches under way; past it, the member counts as unreachable for 10 minutes; 0: no bound. Size the controller's memory limit with it (docs/operations.md)")
	fs.IntVar(&f.maxObjects, "member-max-objects", 100000, "objects the controller may hold of one member (Services, EndpointSlices, Namespaces, ServiceExports, ServiceImports); past it, the member counts as unreachable for 10 minutes; 0: no bound")
	fs.IntVar(&f.maxExports, "member-max-exports", 20000, "ServiceExports of one member that are used, of those that can be (each costs every consumer a derived Service and its VIP; one without a Service, or from a namespace it may not export from, counts for nothing); past it, its newest are not, their Valid condition TooManyExports; 0: no bound")
	fs.IntVar(&f.workers, "workers", 16, "services synced in parallel; each waits for its writes, so more workers than cores pay off")
	fs.IntVar(&f.memberInFlight, "member-max-in-flight", 16, "services whose writes are under way in one member at once; more wait for a slot rather than queue in its API server; 0: no bound")
	fs.Float64Var(&f.qps, "kube-api-qps", 1000, "queries per second to each cluster's API server (client-go's default of 5 makes a burst of 1,000 services take minutes; --member-max-in-flight bounds the load)")
	fs.IntVar(&f.burst, "kube-api-burst", 2000, "burst of queries to each cluster's API server")
	fs.BoolVar(&f.profiling, "profiling", false, "serve Go's profiles under /debug/pprof/ on --http-address")
	fs.BoolVar(&f.leaderElect, "leader-elect", true, "elect the active replica of each shard through a Lease on the hub")
	fs.IntVar(&f.shards, "shards", 1, "shards the services are split into, each synced by the replica holding its Lease (docs/scaling.md); the same on every replica")
	fs.IntVar(&f.maxShards, "max-shards", 0, "the most shards one replica takes; 0: no bound. Shards freed in a rollout then go to replicas holding fewer, but a shard waits for a replica while every one left holds this many (docs/scaling.md)")
	fs.DurationVar(&f.leaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits before taking over an unrenewed leadership")
	fs.DurationVar(&f.renewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew before it stops leading")
	fs.DurationVar(&f.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often leadership is tried and renewed")
	fs.DurationVar(&f.sourceLeaseDuration, "source-lease-duration", 20*time.Second, "duration of the Leases source-<cluster> in every member")
	fs.DurationVar(&f.sourceLeaseRenew, "source-lease-renew", 5*time.Second, "how often the Leases source-<cluster> are renewed")
	fs.DurationVar(&f.probeInterval, "probe-interval", 5*time.Second, "how often each member's API server is probed")
	fs.DurationVar(&f.renewCredentialsBefore, "renew-credentials-before", credentials.DefaultRenewBefore, "how long before it expires the token of a member Secret is renewed (a new token of the controller's ServiceAccount there, written back into the Secret); when it takes more than nine tenths of a token's lifetime, two thirds into the lifetime instead (a member whose API server caps tokens at a day renews each after 16 hours); 0: never")
	fs.DurationVar(&f.credentialDuration, "credential-duration", 30*24*time.Hour, "how long a renewed member token is valid (the member's API server may cap it); longer than --renew-credentials-before")
	fs.Func("allow-export", "comma-separated NAMESPACE or NAMESPACE/NAME that may be exported although protected (default/kubernetes, every kube-* namespace, mcs-system, --namespace, --protected-namespaces); repeatable", func(v string) error {
		allowed, err := controller.ParseAllowExport(v)
		f.allowExport = append(f.allowExport, allowed...)
		return err
	})
	fs.Float64Var(&f.changeRate, "member-change-rate", 500, "changes of one member (source EndpointSlices, Services, ServiceExports, ServiceImports) a second that are synced at once, in bursts of 20 seconds' worth; past it each changed service is synced once its budget allows, however often it changes meanwhile; 0: no bound")
	fs.IntVar(&f.memberMaxEndpoints, "member-max-endpoints", 100000, "endpoints one member's exports may import into each consumer, all services together (each costs every consumer's CoreDNS and kube-proxy); past it its newest exports are left out, their Valid condition TooManyEndpoints; 0: no bound")
	fs.IntVar(&f.maxImportedPorts, "max-imported-ports", 16, "ports of an imported service at most (kube-proxy programs each port for each endpoint); an export whose Service has more is not used, its Valid condition TooManyPorts; 0: no bound")
	fs.BoolVar(&f.createNamespaces, "create-namespaces", false, "create a service's namespace in a consumer that lacks it (labelled app.kubernetes.io/managed-by=mcs-controller.coredns-mcs.io, never deleted); the member's account may only where kubectl mcs join --create-namespaces granted it. Off: such a consumer imports nothing until its namespace is made there")
	fs.IntVar(&f.maxImportedEndpoints, "max-imported-endpoints", 10000, "endpoints of a service imported from one provider at most; past it the rest is left out, and the MultiClusterService's EndpointSliceCollected says so; 0: no bound")
	fs.Func("protected-namespaces", "comma-separated namespaces whose Services are not exported unless --allow-export names them, besides default/kubernetes, every kube-* namespace, mcs-system and --namespace; repeatable", func(v string) error {
		protected, err := controller.ParseProtected(v)
		f.protected = append(f.protected, protected...)
		return err
	})
	fs.Func("export-namespaces", "CLUSTER=NAMESPACE[,NAMESPACE...]: the only namespaces member CLUSTER may export from (CLUSTER= for none); repeatable, one per member", func(v string) error {
		return members.ParseExportNamespaces(f.exportNamespaces, v)
	})
	f.defaultExports = controller.LabelledHubNamespaces
	fs.Func("default-export-namespaces", "what a member that neither --export-namespaces nor its Secret's annotation bounds may export from: labelled (the default), the hub's namespaces labelled "+api.LabelExports+"="+api.ExportsAllowed+"; hub, every namespace that exists on the hub; all, any namespace", func(v string) (err error) {
		f.defaultExports, err = controller.ParseDefaultExports(v)
		return err
	})
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
	flag.Parse()
	return f
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// gcPercent is the controller's GOGC unless the environment sets one. Its
// memory is its caches, and the Go default (100) lets the heap grow to
// twice what they hold before a collection; collecting at half that costs
// it a little CPU, which the API servers' writes dwarf (docs/scaling.md).
const gcPercent = 50

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	f := parseFlags()
	if f.showVersion {
		fmt.Println("mcs-controller", version)
		return
	}
	if err := logsapi.ValidateAndApply(f.logging, nil); err != nil {
		fmt.Fprintln(os.Stderr, "mcs-controller:", err)
		os.Exit(2)
	}
	if err := run(f); err != nil {
		klog.ErrorS(err, "mcs-controller failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

func run(f *flags) error {
	if f.sourceLeaseRenew >= f.sourceLeaseDuration {
		return fmt.Errorf("--source-lease-renew (%s) must be shorter than --source-lease-duration (%s)", f.sourceLeaseRenew, f.sourceLeaseDuration)
	}
	if err := shards.Valid(f.shards); err != nil {
		return err
	}
	if f.renewCredentialsBefore < 0 || f.renewCredentialsBefore > 0 && f.credentialDuration <= f.renewCredentialsBefore {
		return fmt.Errorf("--renew-credentials-before %s, --credential-duration %s: want a renewal point of 0 (never) or more, before a longer duration: a renewed token would be due at once", f.renewCredentialsBefore, f.credentialDuration)
	}
	if f.maxShards < 0 || f.maxShards > 0 && !f.leaderElect {
		return fmt.Errorf("--max-shards %d: want 0, or a bound on the shards a replica takes with --leader-elect", f.maxShards)
	}
	hubRC, err := restConfig(f.kubeconfig)
	if err != nil {
		return fmt.Errorf("hub: --kubeconfig %q: %w", f.kubeconfig, err)
	}
	hubRC.QPS, hubRC.Burst, hubRC.UserAgent = float32(f.qps), f.burst, "mcs-controller/hub"
	hubKube, err := kubernetes.NewForConfig(hubRC)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	hubMCS, err := mcsclient.NewForConfig(hubRC)
	if err != nil {
		return fmt.Errorf("hub: %w", err)
	}
	events := record.NewBroadcaster()
	defer events.Shutdown()
	events.StartStructuredLogging(2)
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: hubKube.CoreV1().Events("")})
	// Before campaigning: a --clusters-kubeconfig that cannot be used fails
	// the start, rather than a leader that holds the lead and does nothing.
	set := shards.NewSet(f.shards)
	profiles, providers, err := clusterProfiles(f, hubRC)
	if err != nil {
		return err
	}
	reg, err := members.NewRegistry(members.Options{
		Profiles: profiles, ProfileNamespace: f.profileNamespace, Access: providers,
		Selector:   set.Selector,
		Kubeconfig: f.clustersKubeconfig, Hub: hubKube, Namespace: f.namespace,
		QPS: float32(f.qps), Burst: f.burst, ProbeEvery: f.probeInterval,
		AllowInsecureTLS: f.allowInsecureMemberTLS, ExportNamespaces: f.exportNamespaces, MaxObjects: f.maxObjects, MaxBytes: int64(f.maxMiB) << 20, MaxExports: f.maxExports, Namespaces: split(f.watchNamespaces),
		Recorder: shardZeroRecorder{events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "mcs-controller"}), set},
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var ready readiness
	srv := serve(f.httpAddress, &ready, f.profiling)
	defer func() { _ = srv.Shutdown(context.Background()) }()

	// taken gets each shard once its Lease is held, and set wants it.
	taken := make(chan int, f.shards)
	work := func(ctx context.Context) error {
		c := controller.New(controller.Options{
			HubKube: hubKube, HubMCS: hubMCS, Members: reg, Namespaces: split(f.watchNamespaces), Workers: f.workers, MemberInFlight: f.memberInFlight,
			Namespace: f.namespace, AllowExport: f.allowExport, Protected: f.protected, MaxImportedEndpoints: f.maxImportedEndpoints, CreateNamespaces: f.createNamespaces, MaxImportedPorts: f.maxImportedPorts, MemberMaxEndpoints: f.memberMaxEndpoints, ChangeRate: f.changeRate, DefaultExports: f.defaultExports, StaleAfter: f.sourceLeaseDuration, Shards: set,
		})
		ready.set(c.Synced)
		renewer := &leases.Renewer{Members: reg, Holder: identity(), Duration: f.sourceLeaseDuration, Every: f.sourceLeaseRenew}
		var wg sync.WaitGroup
		wg.Go(func() { reg.Run(ctx, c.Handlers()) })
		wg.Go(func() {
			hold(ctx, taken, set, reg, c, func() {
				wg.Go(func() { renewer.Run(ctx) })
				if f.renewCredentialsBefore > 0 {
					wg.Go(func() {
						reg.RenewTokens(ctx, members.RenewOptions{Before: f.renewCredentialsBefore, Duration: f.credentialDuration})
					})
				}
			})
		})
		err := c.Run(ctx)
		wg.Wait()
		return err
	}
	if !f.leaderElect {
		for i := range f.shards {
			set.Want(i)
			taken <- i
		}
		return work(ctx)
	}
	return leaderElect(ctx, f, hubKube, set, taken, work)
}

// listShardTimeout bounds the wait for the members to list a shard taken:
// a member whose list takes longer holds up the shard's other members no
// more; its writes may then fail, and be retried, until it has listed.
const listShardTimeout = 30 * time.Second

// hold makes each shard taken this replica's: once every member's
// informers list its objects, its services are synced. The holder of shard
// 0 renews the Leases source-<cluster> and the members' tokens, by renew:
// every replica's registry reads the same Secrets, and one renewal of each
// is wanted, as shardZeroRecorder records one Event.
func hold(ctx context.Context, taken <-chan int, set *shards.Set, reg *members.Registry, c *controller.Controller, renew func()) {
	for {
		var i int
		select {
		case i = <-taken:
		case <-ctx.Done():
			return
		}
		if i == 0 {
			renew()
		}
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, listShardTimeout, true, func(context.Context) (bool, error) {
			sel := set.Selector()
			return reg.Selected(sel) && set.HoldSelected(sel), nil
		})
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			klog.InfoS("Syncing a shard before every member listed its objects", "shard", i, "waited", listShardTimeout)
			set.Hold()
		}
		c.Resync()
		klog.InfoS("Syncing the services of a shard", "shard", i, "of", set.N(), "held", set.Held())
	}
}

// clusterProfiles are the client of the hub's ClusterProfiles and the
// operator's access providers, when --cluster-profile-namespace is set; an
// access-provider file that cannot be used fails the start.
func clusterProfiles(f *flags, hubRC *rest.Config) (inventoryclient.Interface, *access.Config, error) {
	switch {
	case f.profileNamespace == "" && f.profileProviderFile == "":
		return nil, nil, nil
	case f.profileNamespace == "":
		return nil, nil, errors.New("--cluster-profile-provider-file is set, but not --cluster-profile-namespace: set both to register members from ClusterProfiles")
	case f.profileProviderFile == "":
		return nil, nil, fmt.Errorf("--cluster-profile-namespace %s: needs --cluster-profile-provider-file, the access providers that reach its ClusterProfiles' clusters", f.profileNamespace)
	}
	providers, err := members.LoadAccessProviders(f.profileProviderFile)
	if err != nil {
		return nil, nil, fmt.Errorf("--cluster-profile-provider-file: %w", err)
	}
	// The Events on a refused ClusterProfile refer to it by its kind.
	if err := inventory.AddToScheme(scheme.Scheme); err != nil {
		return nil, nil, err
	}
	client, err := inventoryclient.NewForConfig(hubRC)
	if err != nil {
		return nil, nil, fmt.Errorf("hub: %w", err)
	}
	return client, providers, nil
}

// shardZeroRecorder records Events only on the replica that has taken
// shard 0: every replica watches the member Secrets, and a refused one
// needs one Warning, not one per replica. Without --leader-elect, the one
// replica takes every shard before its registry runs.
type shardZeroRecorder struct {
	record.EventRecorder
	set *shards.Set
}

func (r shardZeroRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if r.set.Wants(0) {
		r.EventRecorder.Event(obj, eventtype, reason, message)
	}
}

func (r shardZeroRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.set.Wants(0) {
		r.EventRecorder.Eventf(obj, eventtype, reason, messageFmt, args...)
	}
}

func (r shardZeroRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r.set.Wants(0) {
		r.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
	}
}

// restConfig loads the hub's kubeconfig, or the in-cluster config when
// path is empty, as every controller reaches its own cluster.
func restConfig(path string) (*rest.Config, error) {
	if path == "" {
		return rest.InClusterConfig()
	}
	return clientcmd.BuildConfigFromFlags("", path)
}

// leaderElect campaigns for every shard's Lease, and runs work once this
// replica holds one; set wants each shard it takes, and taken gets it.
// Losing a shard ends the process, so a restarted replica starts from
// fresh caches. Work that fails releases every shard, so that a standby
// takes over rather than wait for a replica that does nothing, and its
// error is returned.
func leaderElect(ctx context.Context, f *flags, hub kubernetes.Interface, set *shards.Set, taken chan<- int, work func(context.Context) error) error {
	// Cancelling ctx is what releases the Leases.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started, result := make(chan struct{}), make(chan error, 1)
	start := sync.OnceFunc(func() {
		close(started)
		go func() {
			err := work(ctx)
			result <- err
			if err != nil {
				cancel()
			}
		}()
	})
	e := &shards.Elector{
		Shards: f.shards, MaxHeld: f.maxShards, Client: hub, Namespace: f.namespace, Identity: identity(),
		LeaseDuration: f.leaseDuration, RenewDeadline: f.renewDeadline, RetryPeriod: f.retryPeriod,
		Acquired: func(i int) {
			klog.InfoS("Leading", "shard", i, "lease", shards.LeaseName(i, f.shards), "identity", identity())
			set.Want(i)
			taken <- i
			start()
		},
		Lost: func(i int) {
			klog.InfoS("Lost the lead: exiting so that a fresh replica takes over", "shard", i, "identity", identity())
			klog.Flush()
			os.Exit(0)
		},
	}
	if err := e.Run(ctx); err != nil {
		return err
	}
	select {
	case <-started: // the campaigns do not wait for work to return
		return <-result
	default:
		return nil
	}
}

var (
	identityOnce sync.Once
	identityVal  string
)

// identity names this replica in Leases: hostname plus a random suffix, so
// two replicas on one host differ.
func identity() string {
	identityOnce.Do(func() {
		host, _ := os.Hostname()
		identityVal = host + "_" + uuid.NewString()[:8]
	})
	return identityVal
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// readiness is the controller's sync check once this replica leads; a
// standby replica is ready: it serves nothing until it leads.
type readiness struct{ check atomic.Pointer[func() error] }

func (r *readiness) set(fn func() error) { r.check.Store(&fn) }

func (r *readiness) err() error {
	if fn := r.check.Load(); fn != nil {
		return (*fn)()
	}
	return nil
}

func serve(addr string, ready *readiness, profiling bool) *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready.err(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("/metrics", legacyregistry.Handler())
	if profiling {
		// As kube-controller-manager's --profiling: heap and CPU profiles
		// say where a big fleet's memory and time go.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.ErrorS(err, "HTTP server failed", "address", addr)
			os.Exit(1)
		}
	}()
	return srv
}
