// Package process runs the binaries that tests, benchmarks and the demo
// start (coredns-mcs, mcs-controller): start one with its arguments and
// environment, its output in a log file, wait until a probe says it is
// ready, and stop it with SIGTERM, then SIGKILL when that takes too long.
package process

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// Config says what to run.
type Config struct {
	Name   string   // in messages; default the binary's
	Binary string   // path of the executable
	Args   []string // its arguments
	Env    []string // added to this process's environment
	Log    string   // file that gets its stdout and stderr (truncated)
	// Detach runs it in a session of its own that outlives this program
	// (make demo leaves its processes running); record it with
	// WritePIDFile so that a later run can stop it.
	Detach bool
}

// Process is a running binary. Should the program that started it die, the
// kernel sends it SIGTERM, unless it was started detached.
type Process struct {
	cfg     Config
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
}

// Start starts the binary without waiting for it to be ready.
func Start(cfg Config) (*Process, error) {
	if cfg.Name == "" {
		cfg.Name = cfg.Binary
	}
	out, err := os.Create(cfg.Log)
	if err != nil {
		return nil, err
	}
	defer out.Close() // the child has its own descriptor
	cmd := exec.Command(cfg.Binary, cfg.Args...)
	cmd.Env = append(os.Environ(), cfg.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if cfg.Detach {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cfg.Name, err)
	}
	p := &Process{cfg: cfg, cmd: cmd, exited: make(chan struct{}), started: time.Now()}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Name is the process's name in messages.
func (p *Process) Name() string { return p.cfg.Name }

// Pid is its process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Log is the file its output goes to.
func (p *Process) Log() string { return p.cfg.Log }

// Started is when it was started.
func (p *Process) Started() time.Time { return p.started }

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Alive is nil while the process runs, else says how it ended.
func (p *Process) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v; see %s", p.cfg.Name, p.cmd.ProcessState, p.cfg.Log)
	default:
		return nil
	}
}

// Output is what the process has written so far.
func (p *Process) Output() string {
	b, err := os.ReadFile(p.cfg.Log)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.cfg.Log, err)
	}
	return string(b)
}

// A Probe is nil once what it checks is ready, else says what it saw.
type Probe func(ctx context.Context) error

// pollEvery is how often WaitFor probes.
const pollEvery = 100 * time.Millisecond

// WaitFor probes until probe is nil, the process exits, ctx ends or
// timeout passes, whichever comes first.
func (p *Process) WaitFor(ctx context.Context, timeout time.Duration, probe Probe) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		err := probe(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v) before it was ready; last probe: %v; see %s", p.cfg.Name, p.cmd.ProcessState, err, p.cfg.Log)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %v; see %s", p.cfg.Name, timeout, err, p.cfg.Log)
		case <-tick.C:
		}
	}
}

// StopGrace is how long Stop waits after SIGTERM before it sends SIGKILL.
const StopGrace = 10 * time.Second

// Stop ends the process with SIGTERM, and with SIGKILL when it has not
// exited after grace; the error says when it had to be killed.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s (pid %d) ignored SIGTERM for %s and was killed", p.cfg.Name, p.Pid(), grace)
	}
}

// Kill ends the process with SIGKILL, as a node failure or an OOM kill
// would, and waits until it has exited.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// TB is the part of testing.TB that StopAtCleanup uses.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Errorf(format string, args ...any)
	Logf(format string, args ...any)
}

// StopAtCleanup stops the process when the test ends, fails the test when
// the process panicked, and logs its output when the test failed.
func (p *Process) StopAtCleanup(t TB) {
	t.Helper()
	t.Cleanup(func() {
		if err := p.Stop(StopGrace); err != nil {
			t.Errorf("%v", err)
		}
		out := p.Output()
		if strings.Contains(out, "panic:") {
			t.Errorf("%s panicked", p.cfg.Name)
		}
		if t.Failed() {
			t.Logf("%s output (%s):\n%s", p.cfg.Name, p.cfg.Log, out)
		}
	})
}

// All is nil once every probe is, tried in order: a later one is not tried
// before the earlier ones pass.
func All(probes ...Probe) Probe {
	return func(ctx context.Context) error {
		for _, probe := range probes {
			if err := probe(ctx); err != nil {
				return err
			}
		}
		return nil
	}
}

// httpTimeout bounds one probe or GET, whatever the caller's context.
const httpTimeout = 2 * time.Second

// HTTPGet gets url with a timeout of its own and returns the status and
// the body.
func HTTPGet(ctx context.Context, url string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, httpTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// HTTPOK is nil once GET url answers 200 (a health endpoint such as
// CoreDNS's /ready or a controller's /readyz).
func HTTPOK(url string) Probe {
	return func(ctx context.Context) error {
		code, body, err := HTTPGet(ctx, url)
		if err != nil {
			return err
		}
		if code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", url, code, strings.TrimSpace(body))
		}
		return nil
	}
}

// dnsTimeout bounds one DNS probe.
const dnsTimeout = 500 * time.Millisecond

// DNSAnswers is nil once the server at addr (host:port) answers a UDP
// query for name and qtype, whatever the answer's rcode.
func DNSAnswers(addr, name string, qtype uint16) Probe {
	return func(ctx context.Context) error {
		c := &dns.Client{Timeout: dnsTimeout}
		if _, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype), addr); err != nil {
			return fmt.Errorf("DNS %s: %w", addr, err)
		}
		return nil
	}
}
