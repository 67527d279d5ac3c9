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
// headless), else the server's addresses. NS queries are rare, so the
// local slices are searched when one comes rather than indexed by address.
func (x *index) nsGlue(local []net.IP) []net.IP {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []net.IP
	add := func(ips ...net.IP) {
		for _, ip := range ips {
			if !slices.ContainsFunc(out, ip.Equal) {
				out = append(out, ip)
			}
		}
	}
	for _, e := range x.entries {
		for _, s := range e.slices {
			for _, ep := range s.endpoints {
				switch {
				case s.imported || !slices.ContainsFunc(local, ep.ip.Equal):
				case e.svc != nil && !e.svc.headless && len(e.svc.ips) > 0:
					add(e.svc.ips...)
				default:
					add(ep.ip)
				}
			}
		}
	}
	if len(out) == 0 {
		return local
	}
	return out
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
