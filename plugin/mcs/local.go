package mcs

import "net"

// boundIPs are the non-loopback addresses the server listens on: the glue of
// ns.dns.clusterset.local. Listening on every address means every interface
// address (as ifaces lists them, e.g. interfaceAddrs), as the kubernetes
// plugin answers when it cannot find its Service.
func boundIPs(hosts []string, ifaces func() []string) []net.IP {
	if len(hosts) == 0 || hosts[0] == "" {
		hosts = ifaces()
	}
	var ips []net.IP
	for _, h := range hosts {
		ip := net.ParseIP(h)
		if ip == nil {
			ip, _, _ = net.ParseCIDR(h)
		}
		if ip != nil && !ip.IsLoopback() {
			ips = append(ips, parseIP(ip.String()))
		}
	}
	return ips
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
