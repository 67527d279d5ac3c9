//go:build lab

package e2e

import (
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// apiProxy is a TCP proxy on loopback in front of member1's API server,
// which a test switches off and on to play an unreachable API server
// without touching the lab. It starts down: connections are refused.
type apiProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener // nil while down
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newAPIProxy returns a proxy, down, and a kubeconfig whose context member1
// reaches member1 through it.
func newAPIProxy(t *testing.T) (*apiProxy, string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(labtest.Get(t).Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	cluster := cfg.Clusters[cfg.Contexts[labtest.Member1].Cluster]
	u, err := url.Parse(cluster.Server)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &apiProxy{addr: ln.Addr().String(), target: u.Host, conns: map[net.Conn]struct{}{}}
	ln.Close()
	t.Cleanup(func() { p.down(); p.wg.Wait() })

	cluster.Server = "https://" + p.addr
	cluster.TLSServerName = "localhost" // a name of the API server's certificate
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return p, path
}

// up accepts connections and forwards them to the API server.
func (p *apiProxy) up(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("proxy: listening on %s again: %v", p.addr, err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go p.serve(ln)
}

// down stops listening and cuts every connection.
func (p *apiProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

func (p *apiProxy) serve(ln net.Listener) {
	defer p.wg.Done()
	for {
		client, err := ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(client)
	}
}

func (p *apiProxy) forward(client net.Conn) {
	defer p.wg.Done()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, server) {
		return
	}
	done := make(chan struct{})
	go func() {
		io.Copy(server, client)
		server.Close()
		close(done)
	}()
	io.Copy(client, server)
	client.Close()
	<-done
	p.untrack(client, server)
}

// track registers conns to be cut by down; when the proxy is down already,
// it closes them and returns false.
func (p *apiProxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		if p.ln == nil {
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
	}
	return p.ln != nil
}

func (p *apiProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}
