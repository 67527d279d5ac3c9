package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeLab is a lab of one cluster whose two components are shell scripts:
// each writes its ready file a moment after it starts, then sleeps, so that
// a start that does not wait for readiness is caught.
func fakeLab(t *testing.T) (*lab, cluster, *component, *component) {
	t.Helper()
	l := newTestLab(t)
	if err := os.MkdirAll(l.binDir, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nsleep 0.3\ntouch \"$1\"\nexec sleep 600\n"
	readyFile := func(l *lab, c cluster, name string) string { return filepath.Join(l.clusterDir(c), name+".ready") }
	fake := func(name string) *component {
		if err := os.WriteFile(filepath.Join(l.binDir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return &component{
			name: name,
			args: func(l *lab, c cluster) []string { return []string{readyFile(l, c, name)} },
			ready: func(c cluster, _ *clients) readiness {
				return readiness{"ready file", func(context.Context) error {
					_, err := os.Stat(readyFile(l, c, name))
					return err
				}}
			},
			timeout: 10 * time.Second,
		}
	}
	a, b := fake("a"), fake("b")
	b.clients = []*component{a}
	c := cluster{name: "one", ip: "127.0.0.1", podCIDR: "10.98.0.0/16", serviceCIDR: "10.99.0.0/16"}
	oldClusters, oldComponents := clusters, components
	clusters, components = []cluster{c}, []*component{a, b}
	t.Cleanup(func() {
		if err := l.stopAll(); err != nil {
			t.Error(err)
		}
		clusters, components = oldClusters, oldComponents
	})
	if _, err := l.prepare(); err != nil {
		t.Fatal(err)
	}
	creds, err := l.credentials()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := newClients(creds, c)
	if err != nil {
		t.Fatal(err)
	}
	s := &startup{lab: l, cluster: c, clients: cl}
	for _, comp := range components {
		if err := s.startAndWait(t.Context(), comp); err != nil {
			t.Fatal(err)
		}
	}
	return l, c, a, b
}

func inspectOne(t *testing.T, l *lab, c cluster, comp *component) componentState {
	t.Helper()
	s, err := l.inspectOne(c, comp)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A stopped component is shown stopped and the lab still runs; start
// brings it back with a new process, waits until it is ready, and restarts
// the component that watches it.
func TestStopAndStartOne(t *testing.T) {
	l, c, a, b := fakeLab(t)
	before, client := inspectOne(t, l, c, b), inspectOne(t, l, c, a)
	if err := l.stopOne(c, b); err != nil {
		t.Fatal(err)
	}
	if before.rec.alive() {
		t.Error("b's process still runs after stop")
	}
	if s := inspectOne(t, l, c, b); s.alive || !s.stopped {
		t.Errorf("after stop: alive %v stopped %v, want stopped", s.alive, s.stopped)
	}
	var out bytes.Buffer
	if err := l.status(&out); err != nil {
		t.Errorf("a lab with a component stopped on purpose is running, but status says %v", err)
	}
	if !slices.ContainsFunc(strings.Split(out.String(), "\n"), func(line string) bool {
		return slices.Equal(strings.Fields(line)[:min(3, len(strings.Fields(line)))], []string{"one", "b", "stopped"})
	}) {
		t.Errorf("status does not show b stopped:\n%s", out.String())
	}
	if err := l.stopOne(c, b); err == nil || !strings.Contains(err.Error(), "one b is not running") {
		t.Errorf("stopping it twice: %v, want an error saying it is not running", err)
	}

	if err := os.Remove(filepath.Join(l.clusterDir(c), "b.ready")); err != nil {
		t.Fatal(err)
	}
	if err := l.startOne(t.Context(), c, b); err != nil {
		t.Fatal(err)
	}
	after := inspectOne(t, l, c, b)
	if !after.alive || after.stopped || after.rec == before.rec {
		t.Errorf("after start: %+v, want a new live process, not marked stopped", after)
	}
	if now := inspectOne(t, l, c, a); !now.alive || now.rec == client.rec {
		t.Errorf("a, which watches b, after b's start: %+v, want it restarted", now)
	}
	if _, err := os.Stat(filepath.Join(l.clusterDir(c), "b.ready")); err != nil {
		t.Errorf("start returned before b was ready: %v", err)
	}
	if err := l.startOne(t.Context(), c, a); err == nil || !strings.Contains(err.Error(), "already runs") {
		t.Errorf("starting a running component: %v, want an error saying it already runs", err)
	}
}

// A component that died is not stopped on purpose: the lab is half dead
// and says so, and start repairs it.
func TestStartOneRepairsADeadComponent(t *testing.T) {
	l, c, _, b := fakeLab(t)
	if err := stop([]componentState{inspectOne(t, l, c, b)}, stopGrace); err != nil {
		t.Fatal(err)
	}
	if err := l.status(io.Discard); err == nil || !strings.Contains(err.Error(), "one b is dead") {
		t.Errorf("status of a lab with a dead component: %v, want it named dead", err)
	}
	if err := l.startOne(t.Context(), c, b); err != nil {
		t.Fatal(err)
	}
	if err := l.status(io.Discard); err != nil {
		t.Errorf("after start: %v", err)
	}
}

// hold stops the component, and starts it again once its input ends.
func TestHold(t *testing.T) {
	l, c, _, b := fakeLab(t)
	r, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- l.hold(context.Background(), c, b, r) }()
	deadline := time.Now().Add(10 * time.Second)
	for !inspectOne(t, l, c, b).stopped {
		if time.Now().After(deadline) {
			t.Fatal("hold did not stop b")
		}
		time.Sleep(50 * time.Millisecond)
	}
	w.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("hold did not return after its input ended")
	}
	if s := inspectOne(t, l, c, b); !s.alive {
		t.Errorf("after hold: %+v, want b running", s)
	}
}

// A lab stopped while a component is held is not half started again.
func TestStartOneNeedsARunningLab(t *testing.T) {
	l, c, _, b := fakeLab(t)
	if err := l.stopOne(c, b); err != nil {
		t.Fatal(err)
	}
	if err := l.down(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.stoppedPath(c, b)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("down left the stop mark: %v", err)
	}
	if err := l.startOne(t.Context(), c, b); err == nil || !strings.Contains(err.Error(), "the lab is not running") {
		t.Errorf("start in a stopped lab: %v, want an error saying the lab is not running", err)
	}
}

func TestLookup(t *testing.T) {
	c, comp, err := (&lab{dir: t.TempDir()}).lookup("member1", "kube-apiserver")
	if err != nil || c.name != "member1" || comp != apiserver {
		t.Errorf("lookup(member1, kube-apiserver) = %s, %v, %v", c.name, comp, err)
	}
	if _, _, err := (&lab{dir: t.TempDir()}).lookup("member9", "etcd"); err == nil || !strings.Contains(err.Error(), "clusters are hub, member1, member2, member3") {
		t.Errorf("an unknown cluster: %v, want the error to list the clusters", err)
	}
	if _, _, err := (&lab{dir: t.TempDir()}).lookup("hub", "kubelet"); err == nil || !strings.Contains(err.Error(), "components etcd, kube-apiserver") {
		t.Errorf("an unknown component: %v, want the error to list the components", err)
	}
}
