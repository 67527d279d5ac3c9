package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// componentState is what the pid files say about one component.
type componentState struct {
	cluster  cluster
	comp     *component
	rec      pidRecord
	recorded bool
	alive    bool
	// stopped: not alive because labctl stop stopped it.
	stopped bool
	log     string
}

// inspect reads the pid file of every component of every cluster.
func (l *lab) inspect() ([]componentState, error) {
	var states []componentState
	for _, c := range clusters {
		for _, comp := range l.components() {
			s, err := l.inspectOne(c, comp)
			if err != nil {
				return nil, err
			}
			states = append(states, s)
		}
	}
	return states, nil
}

// inspectOne reads the pid file and stop mark of comp of c.
func (l *lab) inspectOne(c cluster, comp *component) (componentState, error) {
	rec, found, err := loadPIDRecord(l.pidPath(c, comp))
	if err != nil {
		return componentState{}, err
	}
	s := componentState{cluster: c, comp: comp, rec: rec, recorded: found, alive: found && rec.alive(), log: l.logPath(c, comp)}
	if !s.alive {
		_, err := os.Stat(l.stoppedPath(c, comp))
		s.stopped = err == nil
	}
	return s, nil
}

type labState int

const (
	labStopped labState = iota
	labRunning
	labPartial
)

// summarize tells whether the lab runs. A component that labctl stop
// stopped leaves it running: a test stops one for a while, and other tests
// on the lab wait for it rather than take the lab for broken.
func summarize(states []componentState) labState {
	alive, stopped := 0, 0
	for _, s := range states {
		switch {
		case s.alive:
			alive++
		case s.stopped:
			stopped++
		}
	}
	switch {
	case alive == 0:
		return labStopped
	case alive+stopped == len(states):
		return labRunning
	default:
		return labPartial
	}
}

// halfDeadErr names each dead component of a lab that is partly alive.
func halfDeadErr(states []componentState) error {
	var dead []string
	for _, s := range states {
		if !s.alive && !s.stopped {
			dead = append(dead, fmt.Sprintf("%s %s is dead; see %s", s.cluster.name, s.comp.name, s.log))
		}
	}
	return fmt.Errorf("the lab is half dead:\n  %s\nrun labctl down (make lab-down), then up again",
		strings.Join(dead, "\n  "))
}

func printStates(w io.Writer, states []componentState) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tCOMPONENT\tSTATE\tPID\tLOG")
	for _, s := range states {
		state, pid := "dead", "-"
		switch {
		case s.alive:
			state = "alive"
		case s.stopped:
			state = "stopped"
		}
		if s.recorded {
			pid = fmt.Sprint(s.rec.pid)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.cluster.name, s.comp.name, state, pid, s.log)
	}
	tw.Flush()
}

// status prints every component's state and fails unless all are alive.
func (l *lab) status(w io.Writer) error {
	states, err := l.inspect()
	if err != nil {
		return err
	}
	switch summarize(states) {
	case labStopped:
		return errors.New("the lab is not running")
	case labPartial:
		printStates(w, states)
		return halfDeadErr(states)
	}
	printStates(w, states)
	l.printAccess()
	return nil
}

func (l *lab) down() error {
	unlock, err := l.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := l.stopDemo(); err != nil {
		return err
	}
	if err := l.stopAll(); err != nil {
		return err
	}
	fmt.Println("lab stopped")
	return nil
}

// demoRunDir holds the pid files of what make demo leaves running against
// the lab (mcs-controller, coredns-mcs), written by test/process in
// labctl's format. They would outlive the lab, so down stops them first.
func (l *lab) demoRunDir() string { return filepath.Join(filepath.Dir(l.dir), "demo", "run") }

// stopDemo stops the process groups recorded in demoRunDir.
func (l *lab) stopDemo() error {
	paths, err := filepath.Glob(filepath.Join(l.demoRunDir(), "*.pid"))
	if err != nil {
		return err
	}
	var states []componentState
	for _, path := range paths {
		rec, _, err := loadPIDRecord(path)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(filepath.Base(path), ".pid")
		states = append(states, componentState{cluster: cluster{name: "demo"}, comp: &component{name: name}, rec: rec, recorded: true})
	}
	if err := stop(states, stopGrace); err != nil {
		return err
	}
	for _, path := range paths {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if len(paths) > 0 {
		fmt.Printf("demo processes stopped (%d)\n", len(paths))
	}
	return nil
}

// stopAll stops every recorded process group and checks that the lab's
// ports are free afterwards. Components stop in reverse start order: an
// apiserver whose etcd is gone takes long to shut down.
func (l *lab) stopAll() error {
	states, err := l.inspect()
	if err != nil {
		return err
	}
	for _, comp := range slices.Backward(l.components()) {
		var live []componentState
		for _, s := range states {
			if s.comp == comp && s.alive {
				live = append(live, s)
			}
		}
		if err := stop(live, stopGrace); err != nil {
			return err
		}
	}
	for _, s := range states {
		for _, path := range []string{l.pidPath(s.cluster, s.comp), l.stoppedPath(s.cluster, s.comp)} {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := waitPortsFree(clusters, components); err != nil {
		return err
	}
	// The namespaces are the machine's, not this lab directory's: a lab
	// without its network (a unit test's) leaves alone those a running
	// lab of this machine has.
	if !l.hasNetwork() {
		return nil
	}
	return netDown()
}

// waitPortsFree waits until nothing listens on the ports of comps of cs:
// a process whose main thread has exited may still be closing its sockets
// in its other threads for a moment.
func waitPortsFree(cs []cluster, comps []*component) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		busy := busyPorts(cs, comps)
		if len(busy) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the processes are gone but ports are still in use (see ss -ltnp):\n  %s",
				strings.Join(busy, "\n  "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stopGrace is how long a component may take to end after SIGTERM before
// it is killed.
const stopGrace = 10 * time.Second

// stop stops the process groups of states, politely first: SIGTERM, and
// SIGKILL for what still runs after grace.
func stop(states []componentState, grace time.Duration) error {
	if stopGroups(states, syscall.SIGTERM, grace) || stopGroups(states, syscall.SIGKILL, 5*time.Second) {
		return nil
	}
	var names []string
	for _, s := range states {
		if s.rec.alive() {
			names = append(names, fmt.Sprintf("%s %s (pid %d)", s.cluster.name, s.comp.name, s.rec.pid))
		}
	}
	return fmt.Errorf("still running after SIGKILL: %s", strings.Join(names, ", "))
}

// stopGroups sends sig to every group and reports whether all are gone
// within timeout.
func stopGroups(states []componentState, sig syscall.Signal, timeout time.Duration) bool {
	for _, s := range states {
		if err := s.rec.signal(sig); err != nil {
			fmt.Fprintf(os.Stderr, "signalling %s %s (pid %d): %v\n", s.cluster.name, s.comp.name, s.rec.pid, err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		running := false
		for _, s := range states {
			running = running || s.rec.alive()
		}
		if !running {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// busyPorts lists the addresses of comps of cs that something listens on.
func busyPorts(cs []cluster, comps []*component) []string {
	var busy []string
	for _, c := range cs {
		for _, comp := range comps {
			for _, port := range comp.ports {
				ln, err := net.Listen("tcp", c.addr(port))
				if err != nil {
					busy = append(busy, fmt.Sprintf("%s (%s %s): %v", c.addr(port), c.name, comp.name, err))
					continue
				}
				ln.Close()
			}
		}
	}
	return busy
}

// lock keeps two labctl commands from starting or stopping the lab at
// once; the second waits for the first.
func (l *lab) lock() (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(l.lockPath()), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(l.lockPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockTimeout)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("another labctl is starting or stopping the lab (lock %s held): %w", l.lockPath(), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watch stops the lab once r reaches end of file. labtest hands it a pipe
// whose write end only the test binary holds: the kernel closes it however
// the test binary ends, so the lab it started never outlives it. While it
// watches it holds a lock, which tells labtest in the next test binary to
// wait until this lab is gone.
func (l *lab) watch(r io.Reader) error {
	f, err := os.OpenFile(l.watchLockPath(), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", l.watchLockPath(), err)
	}
	_, _ = io.Copy(io.Discard, r)
	return l.down()
}
