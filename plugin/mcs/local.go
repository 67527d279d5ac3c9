package mcs

import (
	"net"
	"slices"
)

// boundIPs are the non-loopback addresses the server listens on, from
// which the glue of ns.dns.clusterset.local comes (see nsGlue). Listening on
// every address (no bind, or bind 0.0.0.0 or ::) means every interface
// address, as ifaces lists them (e.g. interfaceAddrs), as for the
// kubernetes plugin.
func boundIPs(hosts []string, ifaces func() []string) []net.IP {
	if len(hosts) == 0 || slices.ContainsFunc(hosts, unspecified) {
		hosts = ifaces()
	}
	var ips []net.IP
	for _, h := range hosts {
		if ip := hostIP(h); ip != nil && !ip.IsLoopback() && !ip.IsUnspecified() {
			ips = append(ips, parseIP(ip.String()))
		}
	}
	return ips
}

// hostIP reads an address of bind (an IP) or of an interface (a CIDR).
func hostIP(h string) net.IP {
	if ip := net.ParseIP(h); ip != nil {
		return ip
	}
	ip, _, _ := net.ParseCIDR(h)
	return ip
}

func unspecified(h string) bool {
	ip := hostIP(h)
	return h == "" || ip != nil && ip.IsUnspecified()
}

// nsGlue answers ns.dns.clusterset.local as the kubernetes plugin answers
// ns.dns.<cluster domain>: the addresses of the Service whose endpoints are
// this server's addresses (its ClusterIPs, or the endpoints themselves when
// headless), else local, the server's addresses. It reads what the index
// keeps current as it changes (glue.go): any pod may send NS queries, and
// none of them costs a scan.
func (x *index) nsGlue(local []net.IP) []net.IP {
	if ips := *x.glue.ips.Load(); len(ips) > 0 {
		return ips
	}
	return local
}

func interfaceAddrs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		log.Warningf("cannot list interface addresses for ns.dns glue: %v", err)
		return nil
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		out = append(out, a.String())
	}
	return out
}
