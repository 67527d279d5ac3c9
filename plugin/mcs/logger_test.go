package mcs

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/coredns/caddy"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"k8s.io/klog/v2"
)

// lockedBuffer is a log output that informers left running by other tests
// may write to while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// What client-go logs through klog after setup comes out in CoreDNS's log
// as plugin/mcs, errors as errors.
func TestKlogThroughPluginLog(t *testing.T) {
	var out lockedBuffer
	clog.SetOutput(&out)
	t.Cleanup(func() {
		klog.ClearLogger()
		clog.Discard()
	})
	c := caddy.NewTestController("dns", "mcs cluster.local {\n kubeconfig "+writeKubeconfig(t)+"\n cluster member1\n}")
	if err := setup(c); err != nil {
		t.Fatalf("setup: %v", err)
	}

	klog.Infof("reflector %s started", "r1")
	klog.Warning("API warning")
	klog.ErrorS(errors.New("connection refused"), "watch failed", "resource", "services", "attempt", 3)
	klog.Background().WithValues("reflector", "r2").Info("listing")
	klog.V(4).Info("chatter") // below klog's default verbosity: dropped

	got := out.String()
	for _, want := range []string{
		"[INFO] plugin/mcs: reflector r1 started\n",
		"[INFO] plugin/mcs: API warning\n",
		`[ERROR] plugin/mcs: watch failed: connection refused resource="services" attempt=3` + "\n",
		`[INFO] plugin/mcs: listing reflector="r2"` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %q; got:\n%s", want, got)
		}
	}
	if strings.Contains(got, "chatter") {
		t.Errorf("a V(4) line was logged at klog's default verbosity:\n%s", got)
	}
}
