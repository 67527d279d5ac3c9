package mcs

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// BenchmarkServeDNS measures the answer path (index lookup, decision,
// message build) without the network: run with -benchmem.
func BenchmarkServeDNS(b *testing.B) {
	cfg := baseConfig()
	objs := append(scenario{strategy: "LocalFirst", localSvc: true, setVIP: true, local: readyLocal, remote: readyRemote}.objects(), clustersetObjects()[2:]...)
	f := newFixture(b, cfg, objs...)
	addServices(f.m.idx, 10000)
	cases := []struct {
		name  string
		qname string
		qtype uint16
	}{
		{"native A", serveName, dns.TypeA},
		{"native A RemoteAndLocal", "svc-1.bulk.svc.cluster.local.", dns.TypeA},
		{"native SRV", "_http._tcp.serve.demo.svc.cluster.local.", dns.TypeSRV},
		{"clusterset A", "serve.demo.svc.clusterset.local.", dns.TypeA},
		{"clusterset headless A", "web.demo.svc.clusterset.local.", dns.TypeA},
		{"clusterset SRV", "_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV},
		{"passed on", "plain.demo.svc.cluster.local.", dns.TypeA},
		{"NS clusterset.local", "clusterset.local.", dns.TypeNS},
		{"A ns.dns.clusterset.local", "ns.dns.clusterset.local.", dns.TypeA},
	}
	f.m.setNSAddrs([]net.IP{parseIP("10.0.0.10")})
	f.m.Next = test.NextHandler(dns.RcodeSuccess, nil)
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := new(dns.Msg)
			r.SetQuestion(c.qname, c.qtype)
			w := &test.ResponseWriter{}
			ctx := context.Background()
			rec := dnstest.NewRecorder(w)
			if _, err := f.m.ServeDNS(ctx, rec, r); err != nil || (rec.Msg == nil) != (c.name == "passed on") {
				b.Fatalf("%s: answered %v, err %v: mcs must answer all but the passed-on name", c.qname, rec.Msg, err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.m.ServeDNS(ctx, w, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// addServices fills the index as the informers would with n more imported
// services, so lookups run against a realistically sized map.
func addServices(x *index, n int) {
	for i := range n {
		name := fmt.Sprintf("svc-%d", i)
		x.setImport(nil, &serviceImport{objMeta: newMeta("bulk", name, ""), ips: parseIPs([]string{"10.200.0.1"}), strategy: api.RemoteAndLocal})
		x.setSlice(nil, toSlice(importedSlice("bulk", name, "member2", name, nil, ep{ip: "10.201.0.1"}), false))
	}
}
