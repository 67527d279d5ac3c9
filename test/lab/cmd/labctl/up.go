package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Start-up deadlines. The apiserver's is the longest: four of them
// bootstrap at once on two cores.
const (
	etcdTimeout      = 30 * time.Second
	apiserverTimeout = 90 * time.Second
	setupTimeout     = 60 * time.Second
	pollInterval     = 250 * time.Millisecond
	// lockTimeout covers a whole start-up of the lab by another labctl.
	lockTimeout = 3 * time.Minute
)

// up starts the lab unless it already runs. A lab of which only some
// components are alive is reported, not repaired: its logs tell why.
func (l *lab) up(ctx context.Context) error {
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()

	states, err := l.inspect()
	if err != nil {
		return err
	}
	switch summarize(states) {
	case labRunning:
		fmt.Println("lab already running")
		printStates(os.Stdout, states)
		l.printAccess()
		return nil
	case labPartial:
		return halfDeadErr(states)
	}
	return l.startFresh(ctx)
}

func (l *lab) startFresh(ctx context.Context) error {
	if busy := busyPorts(clusters, components); len(busy) > 0 {
		return fmt.Errorf("ports the lab needs are in use (see ss -ltnp):\n  %s", strings.Join(busy, "\n  "))
	}
	began := time.Now()
	creds, err := l.prepare()
	if err != nil {
		return err
	}
	if err := l.netUp(); err != nil {
		return err
	}
	if err := l.startClusters(ctx, creds); err != nil {
		fmt.Fprintln(os.Stderr, "lab start-up failed; stopping what was started (logs stay in "+l.dir+"/logs)")
		if stopErr := l.stopAll(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return err
	}
	fmt.Printf("lab up in %.1fs\n", time.Since(began).Seconds())
	l.printAccess()
	return nil
}

// startClusters starts every cluster at once; the first failure cancels
// the others' start-up.
func (l *lab) startClusters(ctx context.Context, creds credentials) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() {
			if errs[i] = l.startCluster(ctx, creds, c); errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	// Report the failures, not the start-ups they cancelled.
	var failed []error
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			failed = append(failed, err)
		}
	}
	if len(failed) == 0 && ctx.Err() != nil {
		return fmt.Errorf("start-up interrupted: %w", context.Cause(ctx))
	}
	return errors.Join(failed...)
}

// startCluster starts the components of c in dependency order and returns
// once the cluster can run pods: its node is Ready and its CRDs serve.
func (l *lab) startCluster(ctx context.Context, creds credentials, c cluster) error {
	cl, err := newClients(creds, c)
	if err != nil {
		return err
	}
	s := &startup{lab: l, cluster: c, clients: cl}
	for _, comp := range []*component{etcd, apiserver} {
		if err := s.startAndWait(ctx, comp); err != nil {
			return err
		}
	}
	rest := l.components()[2:] // after etcd and the apiserver
	for _, comp := range rest {
		if err := s.start(comp); err != nil {
			return err
		}
	}
	// kwok's node and the controller manager's work need the lab's objects.
	if err := s.waitFor(ctx, apiserver, setupTimeout, "lab objects created", func(ctx context.Context) error { return cl.createObjects(ctx, c) }); err != nil {
		return err
	}
	for _, comp := range rest {
		if err := s.waitReady(ctx, comp); err != nil {
			return err
		}
	}
	return s.waitFor(ctx, apiserver, setupTimeout, "CRDs Established", cl.crdsEstablished)
}

// startup tracks the processes started for one cluster, so that every wait
// notices any of them dying.
type startup struct {
	lab     *lab
	cluster cluster
	clients *clients
	procs   []*proc
}

func (s *startup) start(comp *component) error {
	p, err := s.lab.start(s.cluster, comp)
	if err != nil {
		return err
	}
	s.procs = append(s.procs, p)
	return nil
}

func (s *startup) startAndWait(ctx context.Context, comp *component) error {
	if err := s.start(comp); err != nil {
		return err
	}
	return s.waitReady(ctx, comp)
}

// waitReady waits until comp serves, as its readiness says.
func (s *startup) waitReady(ctx context.Context, comp *component) error {
	r := comp.ready(s.cluster, s.clients)
	return s.waitFor(ctx, comp, comp.timeout, r.what, r.check)
}

// waitFor polls check until it succeeds. It fails at once when a process of
// the cluster exits, naming its log, and after timeout, naming comp's log.
func (s *startup) waitFor(ctx context.Context, comp *component, timeout time.Duration, what string, check func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := check(checkCtx)
		cancel()
		if err == nil {
			return nil
		}
		for _, p := range s.procs {
			select {
			case <-p.exited:
				return p.deadErr()
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s: %s not reached within %s: %v; see %s",
				s.cluster.name, comp.name, what, timeout, err, s.lab.logPath(s.cluster, comp))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s: waiting for %s: %w", s.cluster.name, comp.name, what, context.Cause(ctx))
		case <-time.After(pollInterval):
		}
	}
}

func etcdHealthy(c cluster) func(context.Context) error {
	return httpHealthy(http.DefaultClient, "http://"+c.addr(etcdClientPort)+"/health", `"health":"true"`)
}

// httpsHealthy probes a component's /healthz. The controller manager and
// scheduler serve it with certificates they sign themselves, and the probe
// only asks whether they are up, so it does not verify them.
func httpsHealthy(addr string) func(context.Context) error {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	return httpHealthy(client, "https://"+addr+"/healthz", "ok")
}

func httpHealthy(client *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(body)))
		}
		return nil
	}
}

func (l *lab) printAccess() {
	names := make([]string, len(clusters))
	for i, c := range clusters {
		names[i] = c.name
	}
	fmt.Printf("kubeconfig: %s (contexts %s)\n", l.kubeconfigPath(), strings.Join(names, ", "))
	fmt.Printf("logs:       %s/logs\n", l.dir)
}
