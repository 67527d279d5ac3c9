package labnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Pod is a pod as its server plays it.
type Pod struct{ Cluster, Name, Node, IP string }

// Hello is what the pod answers, as serve, the image of the MCS API's demo
// (sigs.k8s.io/mcs-api, demo/), does.
func (p Pod) Hello() string {
	return fmt.Sprintf("hello from cluster %s (Node: %s Pod: %s Address: %s)", p.Cluster, p.Node, p.Name, p.IP)
}

var helloRE = regexp.MustCompile(`^hello from cluster (\S+) \(Node: \S+ Pod: (\S+) Address: \S+\)$`)

// Replier reads the cluster and pod out of a Hello; ok is false when reply
// is none.
func Replier(reply string) (cluster, pod string, ok bool) {
	m := helloRE.FindStringSubmatch(reply)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// Grace is how long a pod that is gone goes on serving, as a real one
// does while it terminates: kwok deletes a pod at once, while the Service
// that sends connections to it follows only after its endpoint has left
// the slices and kube-proxy has synced (at most once a second).
const Grace = 2 * time.Second

// Servers play pods: each pod's address bound on the pods' network's lo,
// with an HTTP server on port answering its Hello.
type Servers struct {
	port    int
	mu      sync.Mutex
	running map[string]*server // by address
	err     error              // of the last sync a pod event made
}

type server struct {
	pod     Pod
	srv     *http.Server
	leaving bool // its pod is gone: it stops after Grace
}

// NewServers plays pods on port.
func NewServers(port int) *Servers {
	return &Servers{port: port, running: map[string]*server{}}
}

// Sync starts a server for each pod that has none, stops those whose
// address another pod now has, and those Grace after their pod is gone.
func (ss *Servers) Sync(pods []Pod) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	want := map[string]Pod{}
	for _, p := range pods {
		want[p.IP] = p
	}
	for ip, r := range ss.running {
		p, ok := want[ip]
		switch {
		case ok && p != r.pod:
			if err := ss.stop(r); err != nil {
				return err
			}
		case !ok && !r.leaving:
			r.leaving = true
			time.AfterFunc(Grace, func() { ss.stopLeaving(r) })
		case ok:
			r.leaving = false
		}
	}
	for ip, p := range want {
		if _, ok := ss.running[ip]; !ok {
			if err := ss.start(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// start binds the pod's address (replacing one a crashed run left) and
// serves there.
func (ss *Servers) start(p Pod) error {
	if err := Pods.IP("addr", "replace", p.IP+"/32", "dev", "lo"); err != nil {
		return err
	}
	ln, err := Pods.Listen("tcp", net.JoinHostPort(p.IP, strconv.Itoa(ss.port)))
	if err != nil {
		return fmt.Errorf("pod %s of %s: %w", p.Name, p.Cluster, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, p.Hello())
	})}
	go func() { _ = srv.Serve(ln) }()
	ss.running[p.IP] = &server{pod: p, srv: srv}
	return nil
}

// stopLeaving stops r unless it is gone already.
func (ss *Servers) stopLeaving(r *server) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.running[r.pod.IP] == r && r.leaving {
		if err := ss.stop(r); err != nil {
			ss.err = err
		}
	}
}

func (ss *Servers) stop(r *server) error {
	_ = r.srv.Close()
	delete(ss.running, r.pod.IP)
	return Pods.IP("addr", "del", r.pod.IP+"/32", "dev", "lo")
}

// Close stops every server and unbinds its address.
func (ss *Servers) Close() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var errs []error
	for _, r := range ss.running {
		errs = append(errs, ss.stop(r))
	}
	return errors.Join(errs...)
}

// Err is the error of the last sync that following pods made, if any.
func (ss *Servers) Err() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.err
}

// Follow keeps ss playing the running pods of selector in namespace ns of
// each cluster of kube, from informers, until ctx ends. A pod plays once it
// has an address, before it is ready, and until it is gone, as a real one
// serves while it terminates.
func (ss *Servers) Follow(ctx context.Context, kube map[string]kubernetes.Interface, ns, selector string) error {
	listers := map[string]listersv1.PodLister{}
	var informers []cache.SharedIndexInformer
	for cluster, client := range kube {
		inf := podInformer(client, ns, selector)
		listers[cluster] = listersv1.NewPodLister(inf.GetIndexer())
		informers = append(informers, inf)
	}
	resync := func() {
		err := ss.Sync(running(listers))
		ss.mu.Lock()
		ss.err = err
		ss.mu.Unlock()
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { resync() },
		UpdateFunc: func(any, any) { resync() },
		DeleteFunc: func(any) { resync() },
	}
	for _, inf := range informers {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return err
		}
		go inf.Run(ctx.Done())
	}
	for _, inf := range informers {
		if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
			return fmt.Errorf("the pods of %s in %s did not sync", selector, ns)
		}
	}
	return ss.Sync(running(listers))
}

func podInformer(client kubernetes.Interface, ns, selector string) cache.SharedIndexInformer {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	return f.Core().V1().Pods().Informer()
}

func running(listers map[string]listersv1.PodLister) []Pod {
	var out []Pod
	for cluster, l := range listers {
		list, _ := l.List(labels.Everything()) // a lister's List does not fail
		for _, k := range list {
			if k.Status.PodIP != "" && k.Status.Phase == corev1.PodRunning {
				out = append(out, Pod{Cluster: cluster, Name: k.Name, Node: k.Spec.NodeName, IP: k.Status.PodIP})
			}
		}
	}
	return out
}

// Get sends GET url from inside n, on a connection of its own, and returns
// the body without its trailing newline.
func (n Netns) Get(ctx context.Context, url string, timeout time.Duration) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := n.HTTPClient(timeout).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(body)), err
}
