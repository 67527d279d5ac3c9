package process

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A pid file records a detached process for whoever stops it later: the
// next run of the program that started it, or labctl down (make lab-down),
// which reads the same format, "<pid> <start time>\n". The start time,
// field 22 of /proc/<pid>/stat, tells the recorded process from an
// unrelated one that got its pid since.

// WritePIDFile records p in path.
func (p *Process) WritePIDFile(path string) error {
	start, err := startTime(p.Pid())
	if err != nil {
		return fmt.Errorf("recording %s: %w", p.cfg.Name, err)
	}
	return os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", p.Pid(), start), 0o644)
}

// StopPIDFile stops the process group that the detached process recorded
// in path leads, if it still runs: SIGTERM, then SIGKILL after grace. It
// removes the file; without one there is nothing to stop.
func StopPIDFile(path string, grace time.Duration) error {
	r, found, err := readPIDFile(path)
	if !found || err != nil {
		return err
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if !r.alive() {
			break
		}
		_ = syscall.Kill(-r.pid, sig)
		for deadline := time.Now().Add(grace); r.alive() && time.Now().Before(deadline); {
			time.Sleep(pollEvery)
		}
	}
	if r.alive() {
		return fmt.Errorf("pid %d of %s still runs after SIGKILL", r.pid, path)
	}
	return os.Remove(path)
}

// SignalPIDFile sends sig to the process group that the process recorded
// in path leads: SIGSTOP and SIGCONT freeze and thaw a lab component, as a
// hung or cut-off server would be.
func SignalPIDFile(path string, sig syscall.Signal) error {
	r, found, err := readPIDFile(path)
	switch {
	case err != nil:
		return err
	case !found || !r.alive():
		return fmt.Errorf("%s: no running process", path)
	}
	return syscall.Kill(-r.pid, sig)
}

// pidRecord is a pid file's content.
type pidRecord struct {
	pid   int
	start uint64
}

func (r pidRecord) alive() bool {
	s, err := startTime(r.pid)
	return err == nil && s == r.start
}

func readPIDFile(path string) (r pidRecord, found bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return r, false, nil
	}
	if err != nil {
		return r, false, err
	}
	if _, err := fmt.Sscanf(string(data), "%d %d", &r.pid, &r.start); err != nil {
		return r, true, fmt.Errorf("%s: %w", path, err)
	}
	return r, true, nil
}

// startTime reads the start time of pid from /proc; a process that has
// exited (a zombie included) has none.
func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name in parentheses may hold spaces: count the fields
	// after it, from field 3 (the state).
	s := string(data)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	if fields[0] == "Z" || fields[0] == "X" {
		return 0, fmt.Errorf("process %d has exited", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
