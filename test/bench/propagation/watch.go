package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
)

// importWatch follows the imported EndpointSlices of the benchmark's
// namespace in one consumer with an informer, as coredns-mcs does, and tells
// when a slice's ready addresses first became what a waiter wants.
type importWatch struct {
	cluster string
	stopCh  chan struct{}

	mu      sync.Mutex
	content map[string]string    // slice name → its ready addresses (answerOf)
	since   map[string]time.Time // when content was first seen
	waiters map[string][]waiter  // by slice name
}

type waiter struct {
	want string
	at   chan time.Time // gets since, once
}

// syncTimeout bounds the informer's initial list.
const syncTimeout = time.Minute

// watchImports watches every consumer, the one that joins too.
func watchImports(ctx context.Context, w *world) (watches, error) {
	var all watches
	for _, c := range w.consumers(true) {
		iw, err := watchImportsIn(ctx, w, c)
		if err != nil {
			all.stop()
			return nil, err
		}
		all = append(all, iw)
	}
	return all, nil
}

func watchImportsIn(ctx context.Context, w *world, cluster string) (*importWatch, error) {
	iw := &importWatch{cluster: cluster, stopCh: make(chan struct{}), content: map[string]string{}, since: map[string]time.Time{}, waiters: map[string][]waiter{}}
	f := informers.NewSharedInformerFactoryWithOptions(w.clients[cluster], 0,
		informers.WithNamespace(w.opts.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = discoveryv1.LabelManagedBy + "=" + api.ManagedBy
		}))
	inf := f.Discovery().V1().EndpointSlices().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    iw.observe,
		UpdateFunc: func(_, obj any) { iw.observe(obj) },
		DeleteFunc: iw.forget,
	})
	if err != nil {
		return nil, err
	}
	f.Start(iw.stopCh)
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(syncCtx.Done(), inf.HasSynced) {
		iw.stop()
		return nil, fmt.Errorf("the informer of endpointslices in %s/%s did not sync within %s", cluster, w.opts.namespace, syncTimeout)
	}
	return iw, nil
}

func (iw *importWatch) stop() { close(iw.stopCh) }

// watches are one importWatch per consumer.
type watches []*importWatch

func (ws watches) stop() {
	for _, iw := range ws {
		iw.stop()
	}
}

// awaited tells when one watch saw a slice take the value awaited.
type awaited struct {
	iw *importWatch
	at <-chan time.Time
}

// await is importWatch.await in each of clusters.
func (ws watches) await(clusters []string, slice, want string) []awaited {
	var out []awaited
	for _, iw := range ws {
		if slices.Contains(clusters, iw.cluster) {
			out = append(out, awaited{iw, iw.await(slice, want)})
		}
	}
	return out
}

func (iw *importWatch) observe(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	now, content := time.Now(), answerOf(readyAddresses(s))
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.content[s.Name] == content {
		return
	}
	iw.content[s.Name], iw.since[s.Name] = content, now
	kept := iw.waiters[s.Name][:0]
	for _, wt := range iw.waiters[s.Name] {
		if wt.want == content {
			wt.at <- now
		} else {
			kept = append(kept, wt)
		}
	}
	iw.waiters[s.Name] = kept
}

func (iw *importWatch) forget(obj any) {
	if s, ok := handler.Unwrap(obj).(*discoveryv1.EndpointSlice); ok {
		iw.mu.Lock()
		delete(iw.content, s.Name)
		delete(iw.since, s.Name)
		iw.mu.Unlock()
	}
}

// await returns a channel that gets the time slice's ready addresses were
// first seen to be want: at once when they are already.
func (iw *importWatch) await(slice, want string) <-chan time.Time {
	at := make(chan time.Time, 1)
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if iw.content[slice] == want {
		at <- iw.since[slice]
		return at
	}
	iw.waiters[slice] = append(iw.waiters[slice], waiter{want: want, at: at})
	return at
}

// current is what the slice holds as last seen, for error messages.
func (iw *importWatch) current(slice string) string {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if c, ok := iw.content[slice]; ok {
		return c
	}
	return "(no such slice)"
}

// readyAddresses are the addresses of a slice's ready endpoints (ready
// true or unset, as coredns-mcs counts them).
func readyAddresses(s *discoveryv1.EndpointSlice) []string {
	var out []string
	for _, e := range s.Endpoints {
		if e.Conditions.Ready == nil || *e.Conditions.Ready {
			out = append(out, e.Addresses...)
		}
	}
	return out
}
