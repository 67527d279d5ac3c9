package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestPIDRecordRoundTrip(t *testing.T) {
	rec, err := readPIDRecord(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rec.pid != os.Getpid() || rec.startTime == 0 || !rec.alive() {
		t.Fatalf("record of this process %+v, alive %v", rec, rec.alive())
	}
	path := filepath.Join(t.TempDir(), "x.pid")
	if err := rec.write(path); err != nil {
		t.Fatal(err)
	}
	got, found, err := loadPIDRecord(path)
	if err != nil || !found || got != rec {
		t.Fatalf("loaded %+v (found %v, %v), wrote %+v", got, found, err, rec)
	}
}

func TestLoadPIDRecordMissingOrBad(t *testing.T) {
	dir := t.TempDir()
	if rec, found, err := loadPIDRecord(filepath.Join(dir, "none.pid")); found || err != nil || rec != (pidRecord{}) {
		t.Errorf("no file: %+v, found %v, %v; want nothing found and no error", rec, found, err)
	}
	bad := filepath.Join(dir, "bad.pid")
	if err := os.WriteFile(bad, []byte("not a pid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, found, err := loadPIDRecord(bad); !found || err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("garbage: found %v, %v; want an error naming the file", found, err)
	}
}

// A record of a process that has exited, or of a pid since reused by
// another process, is not alive.
func TestPIDRecordDetectsDeadProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	rec, err := readPIDRecord(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.alive() {
		t.Fatal("a running sleep is not alive")
	}
	reused := pidRecord{pid: rec.pid, startTime: rec.startTime + 1}
	if reused.alive() {
		t.Error("a record whose start time differs is alive: a reused pid would be taken for the component")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if rec.alive() {
		t.Error("a killed process is still alive")
	}
	if _, err := readPIDRecord(rec.pid); err == nil {
		t.Error("recorded a process that has exited")
	}
	if err := rec.signal(9); err != nil {
		t.Errorf("signalling a dead process: %v", err)
	}
}

func TestSummarize(t *testing.T) {
	state := func(alive ...bool) []componentState {
		var out []componentState
		for i, a := range alive {
			out = append(out, componentState{cluster: clusters[i], comp: etcd, alive: a, log: "log-" + clusters[i].name})
		}
		return out
	}
	if got := summarize(state(false, false)); got != labStopped {
		t.Errorf("none alive: %v", got)
	}
	if got := summarize(state(true, true)); got != labRunning {
		t.Errorf("all alive: %v", got)
	}
	half := state(true, false)
	if got := summarize(half); got != labPartial {
		t.Errorf("one of two alive: %v", got)
	}
	held := state(true, false)
	held[1].stopped = true
	if got := summarize(held); got != labRunning {
		t.Errorf("one alive, one stopped on purpose: %v, want running", got)
	}
	msg := halfDeadErr(half).Error()
	if !strings.Contains(msg, clusters[1].name+" etcd is dead; see log-"+clusters[1].name) || strings.Contains(msg, clusters[0].name+" etcd") {
		t.Errorf("the error must name the dead component and its log only: %s", msg)
	}
}

// TestInspect reads the pid files of a lab: a live recorded process is
// alive, a missing or stale pid file is not.
func TestInspect(t *testing.T) {
	l := newTestLab(t)
	if err := os.MkdirAll(filepath.Join(l.dir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := readPIDRecord(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := self.write(l.pidPath(clusters[1], apiserver)); err != nil {
		t.Fatal(err)
	}
	stale := pidRecord{pid: self.pid, startTime: self.startTime + 1}
	if err := stale.write(l.pidPath(clusters[2], etcd)); err != nil {
		t.Fatal(err)
	}
	states, err := l.inspect()
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != len(clusters)*len(components) {
		t.Fatalf("%d states, want one per component of every cluster", len(states))
	}
	for _, s := range states {
		live := s.cluster.name == clusters[1].name && s.comp == apiserver
		recorded := live || s.cluster.name == clusters[2].name && s.comp == etcd
		if s.alive != live || s.recorded != recorded {
			t.Errorf("%s %s: alive %v recorded %v, want %v %v", s.cluster.name, s.comp.name, s.alive, s.recorded, live, recorded)
		}
		if s.log != l.logPath(s.cluster, s.comp) {
			t.Errorf("%s %s: log %s", s.cluster.name, s.comp.name, s.log)
		}
	}
	if summarize(states) != labPartial {
		t.Error("one live component of many is a half-dead lab")
	}
	var out bytes.Buffer
	printStates(&out, states)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(states)+1 || !strings.HasPrefix(lines[0], "CLUSTER") {
		t.Fatalf("status table:\n%s", out.String())
	}
	row := strings.Fields(lines[1+len(components)+1]) // clusters[1]'s kube-apiserver
	if want := []string{clusters[1].name, "kube-apiserver", "alive", strconv.Itoa(os.Getpid())}; !slices.Equal(row[:4], want) {
		t.Errorf("status row %v, want %v", row, want)
	}
}

// down stops what make demo recorded in _output/demo/run, and removes the
// records.
func TestStopDemo(t *testing.T) {
	out := t.TempDir()
	l := &lab{binDir: filepath.Join(out, "bin"), dir: filepath.Join(out, "lab")}
	if err := os.MkdirAll(l.demoRunDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	rec, err := readPIDRecord(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(l.demoRunDir(), "coredns-mcs-member2.pid")
	if err := rec.write(path); err != nil {
		t.Fatal(err)
	}
	if err := l.stopDemo(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the recorded process still runs")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file left behind: %v", err)
	}
	if err := l.stopDemo(); err != nil {
		t.Errorf("nothing recorded: %v", err)
	}
}
