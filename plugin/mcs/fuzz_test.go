package mcs

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
)

// fuzzTargets are plugins over the same objects, one per answer mode.
func fuzzTargets(tb testing.TB) []*MCS {
	var out []*MCS
	for _, mode := range []answerMode{answerVIP, answerEndpoints} {
		cfg := reverseConfig()
		cfg.answer = mode
		objs := append(scenario{strategy: "LocalFirst", localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}.objects(),
			importObj("demo", "web", nil, nil, headlessImport, withStrategy("RemoteAndLocal")),
			importedSlice("demo", "web", "member2", "web-b", []portSpec{httpPort}, ep{ip: "10.2.0.5", hostname: "web-0"}, ep{ip: "fd00::5"}))
		out = append(out, newFixture(tb, cfg, objs...).m)
	}
	return out
}

// FuzzServeDNS feeds arbitrary wire messages to the handler: whatever the
// question (malformed, huge, any type or class), it must not panic, and
// what it writes must be a message that packs, and it writes one
// unless its rcode asks the server to.
func FuzzServeDNS(f *testing.F) {
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{serveName, dns.TypeA},
		{"_http._tcp.serve.demo.svc.cluster.local.", dns.TypeSRV},
		{"web-0.member2.web.demo.svc.clusterset.local.", dns.TypeAAAA},
		{"clusterset.local.", dns.TypeNS},
		{"dns-version.clusterset.local.", dns.TypeTXT},
		{"member2.web.demo.svc.clusterset.local.", dns.TypeANY},
		{"5.0.2.10.in-addr.arpa.", dns.TypePTR},
		{"5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", dns.TypePTR},
	} {
		m := new(dns.Msg)
		m.SetQuestion(q.name, q.qtype)
		buf, _ := m.Pack()
		f.Add(buf)
	}
	plugins := fuzzTargets(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := new(dns.Msg)
		if err := r.Unpack(data); err != nil {
			return
		}
		for _, m := range plugins {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			rcode, err := m.ServeDNS(context.Background(), rec, r)
			if err != nil || !plugin.ClientWrite(rcode) {
				continue // the server writes the error answer
			}
			if rec.Msg == nil {
				t.Fatalf("nothing written for\n%s", r)
			}
			if _, err := rec.Msg.Pack(); err != nil {
				t.Fatalf("answer does not pack: %v\n%s", err, rec.Msg)
			}
		}
	})
}
