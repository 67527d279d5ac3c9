package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
	"github.com/coredns-mcs/coredns-mcs/test/process"
)

// Corefiles of the processes compared. Each serves one port on loopback and
// reports readiness on another; there is no cache, so every query reaches
// the plugin under test.
const (
	// corefileMCSAndKubernetes is a member's stanza: mcs answers the
	// multi-cluster names, kubernetes the rest. It listens on GlueAddr too,
	// so that ns.dns.clusterset.local has an address (ns.go).
	corefileMCSAndKubernetes = `.:{{.Port}} {
    bind 127.0.0.1 {{.GlueAddr}}
    ready 127.0.0.1:{{.ReadyPort}}
    mcs cluster.local clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}} {{.Context}}
        cluster {{.Context}}
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}} {{.Context}}
    }
}
`
	// corefileKubernetes is stock CoreDNS answering clusterset.local with
	// the kubernetes plugin's multicluster option.
	corefileKubernetes = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}} {{.Context}}
        multicluster clusterset.local
    }
}
`
	// corefileKubernetesAlone is corefileMCSAndKubernetes without mcs: what
	// ordinary names cost before coredns-mcs is rolled out.
	corefileKubernetesAlone = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig {{.Kubeconfig}} {{.Context}}
    }
}
`
	// corefileWhoami answers every query without a lookup: the ceiling of
	// the server, the machine and dnsperf.
	corefileWhoami = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    whoami
}
`
	// corefileMCS holds only what mcs holds, for the memory comparison.
	corefileMCS = `.:{{.Port}} {
    bind 127.0.0.1
    ready 127.0.0.1:{{.ReadyPort}}
    mcs cluster.local clusterset.local in-addr.arpa ip6.arpa {
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
	*process.Process
	port      int
	readyPort int
	ready     time.Duration // from start to ready
}

func (s *server) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// fleet is every process this run started; stopAll ends them.
type fleet struct {
	opts    options
	glue    net.IP // the address corefileMCSAndKubernetes listens on besides loopback
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

// launch starts the process without waiting for it. It is not tied to a
// context: it must outlive a cancelled run long enough for stopAll to end
// it gracefully.
func (f *fleet) launch(name, corefile string) (*server, error) {
	dir := filepath.Join(f.opts.outDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return nil, err
	}
	s := &server{port: ports[0], readyPort: ports[1]}
	conf := filepath.Join(dir, "Corefile")
	if err := f.writeCorefile(conf, corefile, s); err != nil {
		return nil, err
	}
	if s.Process, err = process.Start(process.CoreDNS(name, f.opts.coredns, conf, filepath.Join(dir, "coredns.log"))); err != nil {
		return nil, err
	}
	f.servers = append(f.servers, s)
	log.Printf("started %s (pid %d, dns %s, log %s)", name, s.Pid(), s.addr(), s.Log())
	return s, nil
}

func (f *fleet) writeCorefile(path, text string, s *server) error {
	var b strings.Builder
	data := struct {
		Port, ReadyPort               int
		Kubeconfig, Context, GlueAddr string
	}{s.port, s.readyPort, f.opts.kubeconfig, f.opts.context, f.glue.String()}
	if err := template.Must(template.New("Corefile").Parse(text)).Execute(&b, data); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// waitReady waits until the server answers DNS and the ready plugin reports
// every plugin synced.
func (s *server) waitReady(ctx context.Context) error {
	readyURL := fmt.Sprintf("http://127.0.0.1:%d/ready", s.readyPort)
	if err := s.WaitFor(ctx, readyTimeout, process.CoreDNSReady(s.addr(), readyURL)); err != nil {
		return err
	}
	s.ready = time.Since(s.Started())
	log.Printf("%s ready after %s", s.Name(), s.ready.Round(10*time.Millisecond))
	return nil
}

func (f *fleet) stopAll() {
	var errs []error
	for _, s := range f.servers {
		errs = append(errs, s.Stop(process.StopGrace))
	}
	f.servers = nil
	if err := errors.Join(errs...); err != nil {
		log.Print(err)
	}
}

// remove stops one process and forgets it.
func (f *fleet) remove(s *server) error {
	err := s.Stop(process.StopGrace)
	for i, t := range f.servers {
		if t == s {
			f.servers = append(f.servers[:i], f.servers[i+1:]...)
			break
		}
	}
	return err
}
