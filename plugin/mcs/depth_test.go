//go:build !race

package mcs

import (
	"context"
	"net"
	"slices"
	"testing"
	"unsafe"

	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// answerPathRoom is the stack an answer may take below ServeDNS's caller,
// as deepestWrite measures it. A query's goroutine has grown its stack to
// 8 KB by the time the server has unpacked the question, and the server's
// frames take the rest but for about 2.6 KB: on 2026-11-29 a native A
// answer 2,600 bytes deep fitted (whoami's cost per query), one 2,688
// bytes deep doubled the stack at its deepest point on every query, a
// sixth of the server's CPU under dnsperf (test/bench/README.md). A
// margin of about 300 bytes stays below that.
const answerPathRoom = 2304

// TestAnswerPathDepth: mcs's common answers (a VIP, native or clusterset,
// and the name server's address) stay within the room a query's stack
// has, so that answering them costs no growth. Without the race detector
// only: its instrumentation deepens every frame (make test runs this test
// without it).
func TestAnswerPathDepth(t *testing.T) {
	objs := append(scenario{strategy: "RemoteAndLocal", setVIP: true, remote: readyRemote}.objects(), clustersetObjects()[2:]...)
	f := newFixture(t, baseConfig(), objs...)
	f.m.setNSAddrs([]net.IP{parseIP("10.0.0.10")})
	for _, qname := range []string{serveName, "serve.demo.svc.clusterset.local.", "ns.dns.clusterset.local."} {
		r := new(dns.Msg)
		r.SetQuestion(qname, dns.TypeA)
		rec := &recorder{}
		_, _ = f.m.ServeDNS(context.Background(), rec, r)
		if rec.msg == nil || len(rec.msg.Answer) == 0 {
			t.Fatalf("%s: no answer from mcs: %v", qname, rec.msg)
		}
		// The fewest of several: a query now and then takes the
		// allocator's slow path, as it does in a server.
		var depths []uintptr
		for range 5 {
			depth := make(chan uintptr, 1)
			go onLargeStack(func() {
				depth <- deepestWrite(func() { _, _ = f.m.ServeDNS(context.Background(), &test.ResponseWriter{}, r) })
			})
			depths = append(depths, <-depth)
		}
		if d := slices.Min(depths); d > answerPathRoom {
			t.Errorf("%s: answered %d bytes below ServeDNS's caller, want at most %d", qname, d, answerPathRoom)
		}
	}
}

// deepestWrite is how far below its own frame fn wrote to the stack: the
// words below are filled with a pattern first, and the lowest one changed
// marks the deepest frame. It must run on a stack grown beforehand
// (onLargeStack), so that fn's frames stay where they were filled.
//
//go:noinline
func deepestWrite(fn func()) uintptr {
	const pattern, span, gap = 0x5a5a5a5a5a5a5a5a, 12 << 10, 512
	var anchor uint64
	top := unsafe.Pointer(&anchor)
	for off := gap; off < span; off += 8 {
		*(*uint64)(unsafe.Add(top, -off)) = pattern
	}
	fn()
	for off := span - 8; off >= gap; off -= 8 {
		if *(*uint64)(unsafe.Add(top, -off)) != pattern {
			return uintptr(off)
		}
	}
	return 0
}
