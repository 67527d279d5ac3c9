package mcs

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/ready"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/coredns-mcs/coredns-mcs/api"
)

func init() { plugin.Register(pluginName, setup) }

// config is one parsed mcs stanza.
type config struct {
	zones    []string
	rest     *rest.Config // nil: in-cluster, resolved in setup
	cluster  string       // "": read from the ClusterProperty at start-up
	strategy api.Strategy // "": only imports with the strategy annotation
	answer   answerMode
	ttl      uint32
	fall     fall.F
	where    string // "file:line" of the stanza, for errors found after parsing
}

// answerMode is the answer option: what a ClusterIP service answers.
type answerMode string

const (
	answerVIP       answerMode = "vip"
	answerEndpoints answerMode = "endpoints"
)

func setup(c *caddy.Controller) error {
	cfg, err := parseCorefile(c)
	if err != nil {
		return plugin.Error(pluginName, err)
	}
	if cfg.rest == nil {
		if cfg.rest, err = rest.InClusterConfig(); err != nil {
			return plugin.Error(pluginName, fmt.Errorf("%s - no kubeconfig option and not running in a cluster: %w", cfg.where, err))
		}
	}
	cl, err := newClients(cfg.rest)
	if err != nil {
		return plugin.Error(pluginName, fmt.Errorf("%s - %w", cfg.where, err))
	}
	routeKlog()
	m := newMCS(cfg, cl)
	c.OnStartup(func() error {
		server := dnsserver.GetConfig(c)
		m.setNSAddrs(boundIPs(server.ListenHosts, interfaceAddrs))
		m.watcher.peers = readyPeers(server.Handlers(), m)
		m.meet(server.Handlers())
		return nil
	})
	c.OnStartup(m.watcher.start)
	c.OnShutdown(m.watcher.stop)
	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		m.Next = next
		return m
	})
	return nil
}

// meet finds the server's kubernetes plugin among handlers, before the
// watcher starts: what it answers decides what mcs keeps (the endpoints'
// zones only for its zonal names).
func (m *MCS) meet(handlers []plugin.Handler) {
	m.kube = kubePeerOf(handlers)
	m.watcher.keepZones = m.kube.zonal
}

// newMCS wires a parsed stanza to its index and watcher.
func newMCS(cfg *config, cl clients) *MCS {
	idx := newIndex(cfg.strategy, slices.ContainsFunc(cfg.zones, isReverse))
	return &MCS{cfg: cfg, idx: idx, watcher: newWatcher(cfg, cl, idx)}
}

// parseCorefile reads the mcs stanza of a server block (query names are
// parsed by parseName, in qname.go).
func parseCorefile(c *caddy.Controller) (*config, error) {
	var cfg *config
	for c.Next() {
		if cfg != nil {
			return nil, c.Err(plugin.ErrOnce.Error())
		}
		var err error
		if cfg, err = parseStanza(c); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

func parseStanza(c *caddy.Controller) (*config, error) {
	cfg := &config{answer: answerVIP, ttl: 5, where: fmt.Sprintf("%s:%d", c.File(), c.Line())}
	var err error
	if cfg.zones, err = parseZones(c); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for c.NextBlock() {
		opt := c.Val()
		parseOpt, ok := options[opt]
		if !ok {
			return nil, c.Errf("unknown option %q", opt)
		}
		if seen[opt] {
			return nil, c.Errf("option %q given more than once", opt)
		}
		seen[opt] = true
		if err := parseOpt(c, cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// parseZones reads the zones after "mcs" (else the server block's) and
// rejects sets that cannot work: every zone must reach this plugin and each
// name must belong to exactly one zone.
func parseZones(c *caddy.Controller) ([]string, error) {
	args := c.RemainingArgs()
	zones := plugin.OriginsFromArgsOrServerBlock(args, c.ServerBlockKeys)
	if len(zones) == 0 {
		return nil, c.Err("no zones: give them after mcs, e.g. mcs cluster.local clusterset.local")
	}
	block := plugin.OriginsFromArgsOrServerBlock(nil, c.ServerBlockKeys)
	for i, z := range zones {
		if err := checkZone(c, z, block); err != nil {
			return nil, err
		}
		for _, prev := range zones[:i] {
			if dns.IsSubDomain(prev, z) || dns.IsSubDomain(z, prev) {
				return nil, c.Errf("zones %s and %s clash: a name must belong to one zone", prev, z)
			}
		}
	}
	if i := slices.IndexFunc(zones, isReverse); i >= 0 && !slices.Contains(zones, clustersetZone) {
		return nil, c.Errf("reverse zone %s needs zone %s as well: mcs answers PTR queries with clusterset names", zones[i], clustersetZone)
	}
	return zones, nil
}

// isReverse reports whether zone is in-addr.arpa., ip6.arpa. or inside
// one; dnsutil.IsReverse misses the two themselves.
func isReverse(zone string) bool {
	return zone == "in-addr.arpa." || zone == "ip6.arpa." || dnsutil.IsReverse(zone) > 0
}

func checkZone(c *caddy.Controller, z string, block []string) error {
	switch {
	case z == "." || z == "":
		return c.Errf("zone %q would claim every name; name the cluster domain and clusterset.local", z)
	case !validName(z):
		return c.Errf("zone %q is not a valid domain name", z)
	case len(block) > 0 && plugin.Zones(block).Matches(z) == "":
		return c.Errf("zone %s is outside this server block's zones %v", z, block)
	}
	return nil
}

func validName(z string) bool {
	_, ok := dns.IsDomainName(z)
	return ok
}

// options maps each option to its parser; parsers read their own arguments.
var options = map[string]func(*caddy.Controller, *config) error{
	"kubeconfig":  parseKubeconfig,
	"cluster":     parseCluster,
	"strategy":    parseStrategy,
	"answer":      parseAnswer,
	"ttl":         parseTTL,
	"fallthrough": parseFallthrough,
}

func oneArg(c *caddy.Controller, opt, what string) (string, error) {
	args := c.RemainingArgs()
	if len(args) != 1 {
		return "", c.Errf("option %s takes exactly one argument, %s; got %d", opt, what, len(args))
	}
	return args[0], nil
}

func parseKubeconfig(c *caddy.Controller, cfg *config) error {
	args := c.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return c.Errf("option kubeconfig takes PATH [CONTEXT]; got %d arguments", len(args))
	}
	if _, err := os.Stat(args[0]); err != nil {
		return c.Errf("option kubeconfig: %v", err)
	}
	overrides := &clientcmd.ConfigOverrides{}
	if len(args) == 2 {
		overrides.CurrentContext = args[1]
	}
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(&clientcmd.ClientConfigLoadingRules{ExplicitPath: args[0]}, overrides)
	rc, err := loader.ClientConfig()
	if err != nil {
		return c.Errf("option kubeconfig %s: %v", args[0], err)
	}
	cfg.rest = rc
	return nil
}

func parseCluster(c *caddy.Controller, cfg *config) error {
	name, err := oneArg(c, "cluster", "this cluster's name")
	if err != nil {
		return err
	}
	// The name is a DNS label in clusterset names and part of a Lease name.
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return c.Errf("option cluster: %q is not a valid cluster name: %s", name, errs[0])
	}
	cfg.cluster = name
	return nil
}

func parseStrategy(c *caddy.Controller, cfg *config) error {
	v, err := oneArg(c, "strategy", "RemoteAndLocal or LocalFirst")
	if err != nil {
		return err
	}
	s, ok := api.ParseStrategy(v)
	if !ok {
		return c.Errf("option strategy must be %s or %s, not %q", api.RemoteAndLocal, api.LocalFirst, v)
	}
	cfg.strategy = s
	return nil
}

func parseAnswer(c *caddy.Controller, cfg *config) error {
	v, err := oneArg(c, "answer", "vip or endpoints")
	if err != nil {
		return err
	}
	switch answerMode(v) {
	case answerVIP, answerEndpoints:
		cfg.answer = answerMode(v)
		return nil
	}
	return c.Errf("option answer must be %s or %s, not %q", answerVIP, answerEndpoints, v)
}

func parseTTL(c *caddy.Controller, cfg *config) error {
	v, err := oneArg(c, "ttl", "seconds in 0..3600")
	if err != nil {
		return err
	}
	t, err := strconv.Atoi(v)
	if err != nil || t < 0 || t > 3600 {
		return c.Errf("option ttl must be an integer in 0..3600, not %q", v)
	}
	cfg.ttl = uint32(t)
	return nil
}

// parseFallthrough rejects fallthrough zones that no query of this plugin
// can be in: they would silently never apply. The zones are known: they
// come before the block.
func parseFallthrough(c *caddy.Controller, cfg *config) error {
	cfg.fall.SetZonesFromArgs(c.RemainingArgs())
	for _, z := range cfg.fall.Zones {
		if z != "." && plugin.Zones(cfg.zones).Matches(z) == "" {
			return c.Errf("option fallthrough: zone %s is not within mcs zones %v", z, cfg.zones)
		}
	}
	return nil
}

// readyPeers are the plugins of handlers besides m that say when they are
// ready, as the ready plugin finds them.
func readyPeers(handlers []plugin.Handler, m *MCS) []ready.Readiness {
	var peers []ready.Readiness
	for _, h := range handlers {
		if r, ok := h.(ready.Readiness); ok && h != plugin.Handler(m) {
			peers = append(peers, r)
		}
	}
	return peers
}
