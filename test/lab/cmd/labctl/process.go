package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// proc is a component process started by this labctl. Its goroutine reaps
// it, so a crash during start-up is seen at once rather than as a zombie.
type proc struct {
	cluster cluster
	comp    *component
	log     string
	exited  chan struct{}
	err     error // valid once exited is closed
}

// start launches comp of cluster c in a session of its own, so that it
// outlives labctl and can be stopped as a process group, with its output
// in its log file and its pid recorded for later labctl commands. The log
// is appended to: a component started again by labctl start keeps what it
// said before it was stopped (a fresh lab starts with no logs).
func (l *lab) start(c cluster, comp *component) (*proc, error) {
	p := &proc{cluster: c, comp: comp, log: l.logPath(c, comp), exited: make(chan struct{})}
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", c.name, comp.name, err)
	}
	defer logFile.Close()

	cmd := exec.Command(filepath.Join(l.binDir, cmp.Or(comp.bin, comp.name)), comp.args(l, c)...)
	cmd.Dir = l.clusterDir(c)
	cmd.Env = append(os.Environ(), comp.env...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s %s: %w", c.name, comp.name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()

	rec, err := readPIDRecord(cmd.Process.Pid)
	if err == nil {
		err = rec.write(l.pidPath(c, comp))
	}
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		if rec.pid == 0 {
			// It exited before its pid could be recorded.
			return nil, p.deadErr()
		}
		return nil, fmt.Errorf("recording the pid of %s %s: %w", c.name, comp.name, err)
	}
	return p, nil
}

// deadErr says that p exited, and where to read why.
func (p *proc) deadErr() error {
	return fmt.Errorf("%s %s exited during start-up (%v); see %s", p.cluster.name, p.comp.name, p.err, p.log)
}

// pidRecord identifies a process across labctl invocations: the start time
// guards against the pid having been reused by an unrelated process.
type pidRecord struct {
	pid       int
	startTime uint64
}

// readPIDRecord reads the state and start time of pid from /proc.
func readPIDRecord(pid int) (pidRecord, error) {
	state, start, err := procStat(pid)
	if err != nil {
		return pidRecord{}, err
	}
	if state == "Z" || state == "X" {
		return pidRecord{}, fmt.Errorf("process %d has exited", pid)
	}
	return pidRecord{pid: pid, startTime: start}, nil
}

// procStat returns the state and start time fields of /proc/<pid>/stat.
func procStat(pid int) (string, uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0, err
	}
	// The command name in parentheses may contain spaces; fields are
	// counted after its closing parenthesis, starting at field 3 (state).
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return "", 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	return fields[0], start, nil
}

func (r pidRecord) write(path string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", r.pid, r.startTime)), 0o644)
}

// loadPIDRecord reads a pid file; found is false when there is none.
func loadPIDRecord(path string) (rec pidRecord, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return pidRecord{}, false, nil
	}
	if err != nil {
		return pidRecord{}, false, err
	}
	if _, err := fmt.Sscanf(string(data), "%d %d", &rec.pid, &rec.startTime); err != nil {
		return pidRecord{}, true, fmt.Errorf("%s: %w", path, err)
	}
	return rec, true, nil
}

// alive reports whether the recorded process still runs.
func (r pidRecord) alive() bool {
	state, start, err := procStat(r.pid)
	return err == nil && start == r.startTime && state != "Z" && state != "X"
}

// signal sends sig to the process group the recorded process leads.
func (r pidRecord) signal(sig syscall.Signal) error {
	if !r.alive() {
		return nil
	}
	err := syscall.Kill(-r.pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
