// Command coredns-mcs is stock CoreDNS with every in-tree plugin plus mcs,
// which answers multi-cluster service names before cache and kubernetes
// get them.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every in-tree plugin
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns-mcs/coredns-mcs/plugin/mcs"
)

func init() {
	// mcs answers the names of multi-cluster services from memory, as fast as
	// a cache hit and always fresh, so it sits before cache: LocalFirst
	// failover must not wait for a cached answer to expire. Every other name
	// goes on to the stock cache and kubernetes untouched. Before cache, mcs
	// also comes after rewrite, autopath and acl, which then apply to its
	// names as to any other (plugin/mcs/README.md, "Plugin order").
	i := slices.Index(dnsserver.Directives, "cache")
	dnsserver.Directives = slices.Insert(dnsserver.Directives, i, "mcs")
}

// version is set at link time (-ldflags -X main.version=…). CoreDNS's
// -version, and its log line at startup, print it after the Go version,
// where a stock build prints its git commit.
var version = "dev"

func main() {
	coremain.GitCommit = "coredns-mcs " + version
	coremain.Run()
}
