package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// holdGrace is the SIGTERM grace of one component stopped on its own. An
// apiserver stops listening at once but drains its watches for up to its
// request timeout, a minute: longer than a test should keep the shared lab
// waiting, and SIGKILL cuts them as a crash would.
const holdGrace = 2 * time.Second

// stopOne stops comp of c, waits until its ports are free, and marks it
// stopped on purpose, so that status shows it stopped and still counts the
// lab as running (other tests wait for it instead of taking the lab for
// broken) until startOne starts it again.
func (l *lab) stopOne(c cluster, comp *component) error {
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	s, err := l.inspectOne(c, comp)
	if err != nil {
		return err
	}
	if !s.alive {
		return fmt.Errorf("%s %s is not running", c.name, comp.name)
	}
	if err := stop([]componentState{s}, holdGrace); err != nil {
		return err
	}
	if err := waitPortsFree([]cluster{c}, []*component{comp}); err != nil {
		return err
	}
	if err := os.WriteFile(l.stoppedPath(c, comp), nil, 0o644); err != nil {
		return err
	}
	fmt.Printf("%s %s stopped\n", c.name, comp.name)
	return nil
}

// startOne starts comp of c again with the arguments, certificates and
// data labctl up gave it, and waits until it is ready as up does; then it
// restarts the components that watch it. It starts a component that is not
// running in a lab that runs otherwise: one stopped by stopOne, or one
// that died.
func (l *lab) startOne(ctx context.Context, c cluster, comp *component) error {
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	states, err := l.inspect()
	if err != nil {
		return err
	}
	if summarize(states) == labStopped {
		return errors.New("the lab is not running; labctl up starts it")
	}
	s, err := l.inspectOne(c, comp)
	if err != nil {
		return err
	}
	if s.alive {
		return fmt.Errorf("%s %s already runs (pid %d)", c.name, comp.name, s.rec.pid)
	}
	creds, err := l.credentials()
	if err != nil {
		return err
	}
	cl, err := newClients(creds, c)
	if err != nil {
		return err
	}
	up := &startup{lab: l, cluster: c, clients: cl}
	if err := up.start(comp); err != nil {
		return err
	}
	// From here on status tells whether it runs.
	if err := os.Remove(l.stoppedPath(c, comp)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := up.waitReady(ctx, comp); err != nil {
		return err
	}
	fmt.Printf("%s %s started\n", c.name, comp.name)
	return l.restartClients(ctx, up, comp)
}

// restartClients restarts the running components that watch comp, so that
// the cluster works again at once. One stopped on purpose stays stopped.
func (l *lab) restartClients(ctx context.Context, up *startup, comp *component) error {
	for _, client := range comp.clients {
		s, err := l.inspectOne(up.cluster, client)
		if err != nil {
			return err
		}
		if !s.alive {
			continue
		}
		if err := stop([]componentState{s}, holdGrace); err != nil {
			return err
		}
		if err := waitPortsFree([]cluster{up.cluster}, []*component{client}); err != nil {
			return err
		}
		if err := up.startAndWait(ctx, client); err != nil {
			return err
		}
	}
	return nil
}

// hold stops comp of c and starts it again once r reaches end of file.
// labtest hands it a pipe whose write end only the test binary holds: the
// kernel closes it however the test binary ends, so a component a test
// stops always comes back.
func (l *lab) hold(ctx context.Context, c cluster, comp *component, r io.Reader) error {
	// When the test binary is gone, writing to its pipes must fail rather
	// than kill hold before it has started the component again.
	signal.Ignore(syscall.SIGPIPE)
	if err := l.stopOne(c, comp); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, r)
	return l.startOne(ctx, c, comp)
}

// credentials reads back what prepare wrote into the lab's kubeconfig: the
// CA and the admin's token.
func (l *lab) credentials() (credentials, error) {
	cfg, err := clientcmd.LoadFromFile(l.kubeconfigPath())
	if err != nil {
		return credentials{}, err
	}
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok || cfg.AuthInfos[ctx.AuthInfo] == nil || cfg.Clusters[ctx.Cluster] == nil {
		return credentials{}, fmt.Errorf("%s: no current context with a user and a cluster", l.kubeconfigPath())
	}
	return credentials{caPEM: cfg.Clusters[ctx.Cluster].CertificateAuthorityData, token: cfg.AuthInfos[ctx.AuthInfo].Token}, nil
}
