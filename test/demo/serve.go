package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
)

// pod is one of serve's pods, as its server in the demo plays it.
type pod struct{ cluster, name, node, ip string }

func newPod(cluster string, p *corev1.Pod) pod {
	return pod{cluster: cluster, name: p.Name, node: p.Spec.NodeName, ip: p.Status.PodIP}
}

// hello is what the seeds' serve image answers.
func (p pod) hello() string {
	return fmt.Sprintf("hello from cluster %s (Node: %s Pod: %s Address: %s)", p.cluster, p.node, p.name, p.ip)
}

// pods follows serve's pods in member1 and member2 through informers, so
// that the servers follow scaling without a list per request.
type pods struct {
	listers map[string]listersv1.PodLister
	stop    chan struct{}
}

func (s *story) watchPods(ctx context.Context) (*pods, error) {
	p := &pods{listers: map[string]listersv1.PodLister{}, stop: make(chan struct{})}
	for _, m := range []string{member1, member2} {
		f := informers.NewSharedInformerFactoryWithOptions(s.clusters.kube[m], 0, informers.WithNamespace(namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = podSelector }))
		p.listers[m] = f.Core().V1().Pods().Lister()
		f.Start(p.stop)
		for typ, ok := range f.WaitForCacheSync(ctx.Done()) {
			if !ok {
				close(p.stop)
				return nil, fmt.Errorf("%s: the informer of %v did not sync", m, typ)
			}
		}
	}
	return p, nil
}

// running lists the pods that have an address and exist: a pod that is
// being deleted still serves, as a real one does until it exits.
func (p *pods) running() ([]pod, error) {
	var out []pod
	for cluster, l := range p.listers {
		list, err := l.List(labels.Everything())
		if err != nil {
			return nil, err
		}
		for _, k := range list {
			if k.Status.PodIP != "" && k.Status.Phase == corev1.PodRunning {
				out = append(out, newPod(cluster, k))
			}
		}
	}
	return out, nil
}

// servers answer on the running pods' addresses inside the namespace.
type servers struct {
	ns      *netns
	mu      sync.Mutex
	running map[string]*server // by address
}

type server struct {
	pod pod
	srv *http.Server
}

// sync starts a server for each pod that has none and stops those whose
// pod is gone.
func (ss *servers) sync(pods []pod) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	want := map[string]pod{}
	for _, p := range pods {
		want[p.ip] = p
	}
	for ip, r := range ss.running {
		if p, ok := want[ip]; !ok || p != r.pod {
			if err := ss.stop(r); err != nil {
				return err
			}
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

// start binds the pod's address on the namespace's lo and serves there.
func (ss *servers) start(p pod) error {
	if err := ss.ns.ip("addr", "add", p.ip+"/32", "dev", "lo"); err != nil {
		return err
	}
	ln, err := ss.ns.listen(net.JoinHostPort(p.ip, strconv.Itoa(podPort)))
	if err != nil {
		return fmt.Errorf("pod %s of %s: %w", p.name, p.cluster, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, p.hello())
	})}
	go func() { _ = srv.Serve(ln) }()
	ss.running[p.ip] = &server{pod: p, srv: srv}
	return nil
}

func (ss *servers) stop(r *server) error {
	_ = r.srv.Close()
	delete(ss.running, r.pod.ip)
	return ss.ns.ip("addr", "del", r.pod.ip+"/32", "dev", "lo")
}

func (ss *servers) close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, r := range ss.running {
		_ = r.srv.Close()
	}
}
