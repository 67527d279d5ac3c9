// Package benchreport is what the DNS and the propagation benchmarks share
// in running and reporting: their main (log, command line, signals),
// absolute paths for the processes they start, the machine's load, and the
// markdown report printed and saved.
package benchreport

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Main is a benchmark command's main. Log lines start with the time and
// prog; parse reads and checks the command line (see ParseFlags); run does
// the work with the options and a context that SIGINT or SIGTERM cancels.
// An error from either is logged and ends the program with status 1.
//
// The first signal only cancels that context, so that run stops what it
// started and cleans up; second says what a second signal does.
func Main[O any](prog string, second SecondSignal, parse func() (O, error), run func(context.Context, O) error) {
	log.SetFlags(log.Ltime)
	log.SetPrefix(prog + ": ")
	o, err := parse()
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if second == SecondSignalEnds {
		context.AfterFunc(ctx, stop) // the signals' default action again
	}
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

// SecondSignal is what a second SIGINT or SIGTERM does while run cleans up.
type SecondSignal int

const (
	// SecondSignalIgnored: signals are ignored until run returns.
	SecondSignalIgnored SecondSignal = iota
	// SecondSignalEnds: the program ends at once, for a cleanup that may
	// take minutes.
	SecondSignalEnds
)

// ParseFlags parses the flags the caller has defined and refuses any
// argument left after them.
func ParseFlags() error {
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", flag.Args())
	}
	return nil
}

// Run is what a report says of the run itself: when it started, the
// machine's load then, and how long it took.
type Run struct {
	Started time.Time
	Load    string // load averages at the start
	Elapsed time.Duration
}

// Start starts a run.
func Start() Run { return Run{Started: time.Now(), Load: LoadAverage()} }

// Finish records how long the run took, then prints the report, made only
// now, to out and writes it to path.
func (r *Run) Finish(out io.Writer, path string, report func() string) error {
	r.Elapsed = time.Since(r.Started)
	return Save(out, path, report())
}

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
