package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// The lab's kubelet, labctl kubelet CLUSTER, runs beside kwok in a lab
// with its network: kwok still makes every pod Running and Ready and gives
// it its address; this runs, in addition, the pods whose images have a
// stand-in (pod.go), and serves the kubelet API's exec for them, which is
// what kubectl exec reaches through the apiserver. Pods of other images,
// the scale tests' among them, stay kwok's alone.

// kubeletPort is where the apiserver finds a node's kubelet API: kwok
// writes it into the node's status (--node-port), and this serves it on
// the cluster's address.
const kubeletPort = 10250

// kwokServerPort is where kwok, told a node port, serves its own API,
// which nothing uses: off the kubelet's port.
const kwokServerPort = 10251

type kubelet struct {
	lab      *lab
	cluster  cluster
	client   kubernetes.Interface
	pods     corelisters.PodLister
	queue    workqueue.TypedRateLimitingInterface[string]
	standIns map[string][]string
	clock    clock.Clock
	mu       sync.Mutex             // guards running for serveExec
	running  map[string]*runningPod // by namespace/name
}

func standInNames(standIns map[string][]string) string {
	var names []string
	for name := range standIns {
		names = append(names, name)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (l *lab) kubelet(ctx context.Context, name string) error {
	i := slices.IndexFunc(clusters, func(c cluster) bool { return c.name == name })
	if i < 0 {
		return fmt.Errorf("no cluster %s", name)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", l.componentKubeconfig(clusters[i]))
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	k := &kubelet{
		lab:      l,
		cluster:  clusters[i],
		client:   client,
		pods:     factory.Core().V1().Pods().Lister(),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		standIns: standIns(filepath.Dir(filepath.Dir(l.binDir))),
		clock:    clock.RealClock{},
		running:  map[string]*runningPod{},
	}
	enqueue := func(obj any) {
		if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
			k.queue.Add(key)
		}
	}
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }, DeleteFunc: enqueue,
	}); err != nil {
		return err
	}
	srv, err := k.server()
	if err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
		_ = srv.Close()
	}()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	worker := make(chan struct{})
	go func() {
		defer close(worker)
		for k.next() {
		}
	}()
	err = srv.ListenAndServeTLS("", "")
	// The end of ctx shut the queue down, unless the server failed
	// first; either way its last sync ends before the pods stop.
	k.queue.ShutDown()
	<-worker
	k.stopAll()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (k *kubelet) next() bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	if err := k.sync(key); err != nil {
		utilruntime.HandleError(fmt.Errorf("pod %s: %w", key, err))
		k.queue.AddRateLimited(key)
		return true
	}
	k.queue.Forget(key)
	return true
}

// sync makes the pod of key run when it should and stop when not: it runs
// from when kwok has given it an address until it is deleted.
func (k *kubelet) sync(key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return err
	}
	pod, err := k.pods.Pods(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	want := err == nil && pod.DeletionTimestamp == nil && pod.Status.PodIP != "" && runnable(k.standIns, pod)
	if p, ok := k.running[key]; ok && (!want || p.uid != pod.UID) {
		k.mu.Lock()
		delete(k.running, key)
		k.mu.Unlock()
		if err := p.stop(); err != nil {
			return err
		}
	}
	if !want || k.running[key] != nil {
		return nil
	}
	p, err := k.startPod(pod)
	if err != nil {
		return err
	}
	k.mu.Lock()
	k.running[key] = p
	k.mu.Unlock()
	fmt.Printf("pod %s runs at %s\n", key, pod.Status.PodIP)
	return nil
}

// stopAll stops every pod this kubelet runs, when it ends.
func (k *kubelet) stopAll() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for key, p := range k.running {
		if err := p.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pod %s: %v\n", key, err)
		}
	}
}

// server serves the kubelet API's exec at the cluster's address. Its
// certificate is its own: the apiserver, given no kubelet CA, does not
// check it, as kubeadm's clusters did before serving certificates were
// signed. It listens on the host's loopback only.
func (k *kubelet) server() (*http.Server, error) {
	cert, err := selfSigned(k.cluster.ip)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", k.serveExec)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return &http.Server{
		Addr:              k.cluster.addr(kubeletPort),
		Handler:           mux,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}},
		ReadHeaderTimeout: 10 * time.Second,
	}, nil
}

func selfSigned(ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := certTemplate("kubelet")
	tmpl.IPAddresses = []net.IP{net.IP(netip.MustParseAddr(ip).AsSlice())}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
