// Package benchreport is what the DNS and the propagation benchmarks share
// in running and reporting: absolute paths for the processes they start,
// the machine's load, and the markdown report printed and saved.
package benchreport

import (
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Abs makes each path absolute: the benchmarks hand them to processes that
// run in other directories.
func Abs(paths ...*string) error {
	for _, p := range paths {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// LoadAverage is the 1, 5 and 15 minute load averages: other work on the
// machine makes the figures noisier.
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

// Command is how this run was started, as `go run <pkg> <flags>`.
func Command(pkg string) string {
	return strings.Join(append([]string{"go run " + pkg}, os.Args[1:]...), " ")
}

// Save prints the report to out and writes it to path.
func Save(out io.Writer, path, text string) error {
	if _, err := io.WriteString(out, text); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(text), 0o644)
}

// YesNo is a target's "met" column.
func YesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
