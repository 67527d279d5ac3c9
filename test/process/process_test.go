package process

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/test/loopback"
)

// The test binary doubles as the processes under test: with $HELPER set it
// plays that role instead of running the tests.
func TestMain(m *testing.M) {
	if role := os.Getenv("HELPER"); role != "" {
		helper(role, os.Getenv("HELPER_ADDR"))
		return
	}
	os.Exit(m.Run())
}

func helper(role, addr string) {
	fmt.Println("helper", role, "says", os.Getenv("GREETING"))
	switch role {
	case "http": // ready after a while, like a controller's /readyz
		time.Sleep(300 * time.Millisecond)
		http.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		_ = http.ListenAndServe(addr, nil)
	case "dns":
		dns.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
			_ = w.WriteMsg(new(dns.Msg).SetRcode(r, dns.RcodeRefused))
		})
		_ = (&dns.Server{Addr: addr, Net: "udp"}).ListenAndServe()
	case "exit":
		os.Exit(3)
	case "taken": // as CoreDNS fails when its port is taken
		fmt.Println("Listen: listen udp " + addr + ": bind: address already in use")
		os.Exit(1)
	case "stubborn": // ignores SIGTERM
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Minute)
	}
}

func startHelper(t *testing.T, role string) (*Process, string) {
	t.Helper()
	ports, err := loopback.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := Start(Config{
		Name:   role,
		Binary: os.Args[0],
		Env:    []string{"HELPER=" + role, "HELPER_ADDR=" + addr, "GREETING=hello"},
		Log:    filepath.Join(t.TempDir(), role+".log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })
	return p, addr
}

func TestHTTPReady(t *testing.T) {
	p, addr := startHelper(t, "http")
	probe := HTTPOK("http://" + addr + "/readyz")
	if err := probe(t.Context()); err == nil {
		t.Fatal("ready before the helper listens")
	}
	if err := p.WaitFor(t.Context(), 10*time.Second, probe); err != nil {
		t.Fatal(err)
	}
	if err := p.Alive(); err != nil {
		t.Fatal(err)
	}
	if out := p.Output(); !strings.Contains(out, "helper http says hello") {
		t.Errorf("output %q: want the helper's greeting from its environment", out)
	}
	if err := p.Stop(5 * time.Second); err != nil {
		t.Fatalf("a process that ends on SIGTERM: %v", err)
	}
	if p.Alive() == nil {
		t.Fatal("alive after Stop")
	}
}

func TestHTTPOKWantsStatus200(t *testing.T) {
	p, addr := startHelper(t, "http")
	if err := p.WaitFor(t.Context(), 10*time.Second, HTTPOK("http://"+addr+"/readyz")); err != nil {
		t.Fatal(err)
	}
	err := HTTPOK("http://" + addr + "/missing")(t.Context())
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want an error naming the 404, got %v", err)
	}
}

func TestDNSReady(t *testing.T) {
	p, addr := startHelper(t, "dns")
	if err := p.WaitFor(t.Context(), 10*time.Second, CoreDNSServing(addr)); err != nil {
		t.Fatal(err)
	}
}

func TestExitBeforeReady(t *testing.T) {
	p, _ := startHelper(t, "exit")
	err := p.WaitFor(t.Context(), 10*time.Second, func(context.Context) error { return errors.New("never") })
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "never") {
		t.Fatalf("want an error saying it exited and what the probe saw, got %v", err)
	}
	if p.Alive() == nil {
		t.Fatal("Alive is nil after the process exited")
	}
}

func TestWaitForTimeout(t *testing.T) {
	p, addr := startHelper(t, "dns")
	start := time.Now()
	err := p.WaitFor(t.Context(), 300*time.Millisecond, HTTPOK("http://"+addr+"/ready"))
	if err == nil || !strings.Contains(err.Error(), "not ready within 300ms") {
		t.Fatalf("want a timeout, got %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("WaitFor took %s for a 300ms timeout", d)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	p, _ := startHelper(t, "stubborn")
	if err := p.WaitFor(t.Context(), 10*time.Second, func(context.Context) error {
		if !strings.Contains(p.Output(), "ignoring SIGTERM") {
			return errors.New("not yet ignoring SIGTERM")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	err := p.Stop(200 * time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("want an error saying it was killed, got %v", err)
	}
	select {
	case <-p.Exited():
	default:
		t.Fatal("not exited after Stop")
	}
}

func TestAllInOrder(t *testing.T) {
	var tried []string
	probe := func(name string, err error) Probe {
		return func(context.Context) error { tried = append(tried, name); return err }
	}
	if err := All(probe("a", nil), probe("b", errors.New("b")), probe("c", nil))(t.Context()); err == nil || err.Error() != "b" {
		t.Fatalf("want b's error, got %v", err)
	}
	if strings.Join(tried, ",") != "a,b" {
		t.Fatalf("tried %v, want a then b and not c", tried)
	}
}

func TestStartCoreDNSPortTaken(t *testing.T) {
	cfg := Config{Name: "taken", Binary: os.Args[0], Env: []string{"HELPER=taken", "HELPER_ADDR=127.0.0.1:1"}, Log: filepath.Join(t.TempDir(), "log")}
	_, err := StartCoreDNS(t.Context(), cfg, "127.0.0.1:1", 10*time.Second)
	if !errors.Is(err, ErrPortTaken) {
		t.Fatalf("want ErrPortTaken, got %v", err)
	}
	cfg.Env = []string{"HELPER=exit"}
	if _, err := StartCoreDNS(t.Context(), cfg, "127.0.0.1:1", 10*time.Second); err == nil || errors.Is(err, ErrPortTaken) {
		t.Fatalf("want an error that is not ErrPortTaken, got %v", err)
	}
}

// A port taken before CoreDNS bound it makes StartCoreDNSOnFreePorts pick
// ports again; a server that serves is returned with its ports; other
// failures are not retried.
func TestStartCoreDNSOnFreePortsRetries(t *testing.T) {
	var tried int
	p, ports, err := StartCoreDNSOnFreePorts(t.Context(), 1, 10*time.Second, func(ports []int) (Config, string, error) {
		tried++
		role := "dns"
		if tried == 1 {
			role = "taken"
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		return Config{Name: role, Binary: os.Args[0], Env: []string{"HELPER=" + role, "HELPER_ADDR=" + addr}, Log: filepath.Join(t.TempDir(), "log")}, addr, nil
	})
	if err != nil || tried != 2 || len(ports) != 1 {
		t.Fatalf("got %v after %d tries with ports %v, want the second try serving", err, tried, ports)
	}
	p.StopAtCleanup(t)

	tried = 0
	_, _, err = StartCoreDNSOnFreePorts(t.Context(), 1, 10*time.Second, func(ports []int) (Config, string, error) {
		tried++
		return Config{Name: "exit", Binary: os.Args[0], Env: []string{"HELPER=exit"}, Log: filepath.Join(t.TempDir(), "log")}, fmt.Sprintf("127.0.0.1:%d", ports[0]), nil
	})
	if err == nil || tried != 1 {
		t.Fatalf("a server that exits: %v after %d tries, want its error at once", err, tried)
	}
}

func TestPIDFileStopsADetachedProcess(t *testing.T) {
	ports, err := loopback.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	p, err := Start(Config{
		Name: "detached", Binary: os.Args[0], Detach: true,
		Env: []string{"HELPER=http", "HELPER_ADDR=" + addr}, Log: filepath.Join(t.TempDir(), "log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })
	if err := p.WaitFor(t.Context(), 10*time.Second, HTTPOK("http://"+addr+"/readyz")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "detached.pid")
	if err := p.WritePIDFile(path); err != nil {
		t.Fatal(err)
	}
	if err := StopPIDFile(path, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("still running after StopPIDFile")
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file left behind: %v", err)
	}
	if err := StopPIDFile(path, time.Second); err != nil {
		t.Errorf("no pid file: want nothing to do, got %v", err)
	}
}

func TestPIDFileSparesAReusedPID(t *testing.T) {
	start, err := startTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// This test binary, recorded with another start time: the pid was
	// "reused" since, so it must not be signalled.
	path := filepath.Join(t.TempDir(), "reused.pid")
	if err := os.WriteFile(path, fmt.Appendf(nil, "%d %d\n", os.Getpid(), start+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := StopPIDFile(path, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale pid file left behind: %v", err)
	}
}
