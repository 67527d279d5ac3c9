package labtest

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
)

// APIProxy is a TCP proxy on loopback in front of a cluster's API server,
// which a test switches off and on to play an unreachable API server (a
// cut network, a firewall that rejects) without touching the shared lab.
// It listens on the API server's own address (another port), which the
// server's certificate names: a kubeconfig reaches it by that address
// alone, as kubectl mcs join --member-server writes one. It starts down:
// connections are refused.
type APIProxy struct {
	addr, target string

	mu    sync.Mutex
	ln    net.Listener // nil while down
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// APIProxy returns a proxy in front of cluster's API server, down, and a
// kubeconfig of the lab with only contexts (every cluster's when none is
// given), in which cluster's goes through the proxy.
func (l *Lab) APIProxy(t testing.TB, cluster string, contexts ...string) (*APIProxy, string) {
	t.Helper()
	if len(contexts) == 0 {
		contexts = Clusters
	}
	path := l.KubeconfigOf(t, contexts...)
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	server := cfg.Clusters[cfg.Contexts[cluster].Cluster]
	u, err := url.Parse(server.Server)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &APIProxy{addr: ln.Addr().String(), target: u.Host, conns: map[net.Conn]struct{}{}}
	ln.Close()
	t.Cleanup(func() { p.Down(); p.wg.Wait() })

	server.Server = "https://" + p.addr
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return p, path
}

// Addr is the proxy's host:port.
func (p *APIProxy) Addr() string { return p.addr }

// Up accepts connections and forwards them to the API server.
func (p *APIProxy) Up(t testing.TB) {
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

// Down stops listening and cuts every connection.
func (p *APIProxy) Down() {
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

func (p *APIProxy) serve(ln net.Listener) {
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

func (p *APIProxy) forward(client net.Conn) {
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
func (p *APIProxy) track(conns ...net.Conn) bool {
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

func (p *APIProxy) untrack(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		delete(p.conns, c)
	}
}
