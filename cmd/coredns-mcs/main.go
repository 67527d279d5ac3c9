// Command coredns-mcs is stock CoreDNS with every in-tree plugin plus mcs,
// which answers multi-cluster service names before kubernetes gets them.
package main

import (
	"slices"

	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/core/plugin" // every in-tree plugin
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns-mcs/coredns-mcs/plugin/mcs"
)

func init() {
	// mcs must see a query before kubernetes does: it answers the names of
	// multi-cluster services and passes every other name on untouched.
	i := slices.Index(dnsserver.Directives, "kubernetes")
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
