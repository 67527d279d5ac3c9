package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
)

// Corefiles of the processes compared. Each serves one port on loopback and
// reports readiness on another; there is no cache, so every query reaches
// the plugin under test.
const (
	// corefileMCSAndKubernetes is a member's stanza: mcs answers the
	// multi-cluster names, kubernetes the rest.
	corefileMCSAndKubernetes = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    mcs cluster.local clusterset.local {
        kubeconfig {{.Kubeconfig}} {{.Context}}
        cluster {{.Context}}
    }
    kubernetes cluster.local {
        kubeconfig {{.Kubeconfig}} {{.Context}}
    }
}
`
	// corefileKubernetes is stock CoreDNS answering clusterset.local with
	// the kubernetes plugin's multicluster option.
	corefileKubernetes = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    kubernetes cluster.local clusterset.local {
        kubeconfig {{.Kubeconfig}} {{.Context}}
        multicluster clusterset.local
    }
}
`
	// corefileMCS holds only what mcs holds, for the memory comparison.
	corefileMCS = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    mcs cluster.local clusterset.local {
        kubeconfig {{.Kubeconfig}} {{.Context}}
        cluster {{.Context}}
    }
}
`
)

// readyTimeout bounds the initial sync of one process.
const readyTimeout = 3 * time.Minute

// server is one coredns-mcs process.
type server struct {
	name      string
	port      int
	readyPort int
	cmd       *exec.Cmd
	exited    chan struct{}
	log       string
	started   time.Time
	ready     time.Duration // from start to ready
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// fleet is every process this run started; stopAll ends them.
type fleet struct {
	opts    options
	servers []*server
}

// start runs bin/coredns-mcs with corefile and waits until it is ready.
func (f *fleet) start(ctx context.Context, name, corefile string) (*server, error) {
	s, err := f.launch(name, corefile)
	if err != nil {
		return nil, err
	}
	return s, s.waitReady(ctx)
}

// launch starts the process without waiting for it.
func (f *fleet) launch(name, corefile string) (*server, error) {
	dir := filepath.Join(f.opts.outDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return nil, err
	}
	s := &server{name: name, port: ports[0], readyPort: ports[1], exited: make(chan struct{}), log: filepath.Join(dir, "coredns.log")}
	conf := filepath.Join(dir, "Corefile")
	if err := writeCorefile(conf, corefile, f.opts, s); err != nil {
		return nil, err
	}
	out, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	// Not CommandContext: the process must outlive a cancelled run long
	// enough for stopAll to end it gracefully.
	s.cmd = exec.Command(f.opts.coredns, "-conf", conf)
	s.cmd.Stdout, s.cmd.Stderr = out, out
	// Should this program be killed, the kernel stops its servers too.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", f.opts.coredns, err)
	}
	s.started = time.Now()
	f.servers = append(f.servers, s)
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	log.Printf("started %s (pid %d, dns %s, log %s)", name, s.cmd.Process.Pid, s.addr(), s.log)
	return s, nil
}

func writeCorefile(path, text string, o options, s *server) error {
	var b strings.Builder
	data := struct {
		Port, ReadyPort     int
		Kubeconfig, Context string
	}{s.port, s.readyPort, o.kubeconfig, o.context}
	if err := template.Must(template.New("Corefile").Parse(text)).Execute(&b, data); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// waitReady polls until the server answers DNS and the ready plugin reports
// every plugin synced. DNS goes first: ready's endpoint listens before the
// plugins have registered with it, and says 200 in between.
func (s *server) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("%s exited before it was ready; see %s", s.name, s.log)
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s; see %s: %w", s.name, time.Since(s.started).Round(time.Second), s.log, ctx.Err())
		case <-tick.C:
		}
		if s.answers() && s.readyOK() {
			s.ready = time.Since(s.started)
			log.Printf("%s ready after %s", s.name, s.ready.Round(10*time.Millisecond))
			return nil
		}
	}
}

// answers reports whether the server answers a query, whatever the answer.
func (s *server) answers() bool {
	c := &dns.Client{Timeout: 500 * time.Millisecond}
	_, _, err := c.Exchange(new(dns.Msg).SetQuestion(".", dns.TypeNS), s.addr())
	return err == nil
}

func (s *server) readyOK() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", s.readyPort))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stop ends the process with SIGTERM, and SIGKILL when that takes too long.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s (pid %d) ignored SIGTERM and was killed", s.name, s.cmd.Process.Pid)
	}
}

func (f *fleet) stopAll() {
	var errs []error
	for _, s := range f.servers {
		errs = append(errs, s.stop())
	}
	f.servers = nil
	if err := errors.Join(errs...); err != nil {
		log.Print(err)
	}
}

// remove stops one process and forgets it.
func (f *fleet) remove(s *server) error {
	err := s.stop()
	for i, t := range f.servers {
		if t == s {
			f.servers = append(f.servers[:i], f.servers[i+1:]...)
			break
		}
	}
	return err
}
