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
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var pid int
	var start uint64
	if _, err := fmt.Sscanf(string(data), "%d %d", &pid, &start); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	alive := func() bool {
		s, err := startTime(pid)
		return err == nil && s == start
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		if !alive() {
			break
		}
		_ = syscall.Kill(-pid, sig)
		for deadline := time.Now().Add(grace); alive() && time.Now().Before(deadline); {
			time.Sleep(pollEvery)
		}
	}
	if alive() {
		return fmt.Errorf("pid %d of %s still runs after SIGKILL", pid, path)
	}
	return os.Remove(path)
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
