package main

import (
	"slices"
	"testing"

	"github.com/coredns/coredns/core/dnsserver"
)

// mcs runs after the plugins that change or filter a query and before
// cache and kubernetes.
func TestPluginOrder(t *testing.T) {
	at := func(name string) int {
		i := slices.Index(dnsserver.Directives, name)
		if i < 0 {
			t.Fatalf("no plugin %s in %v", name, dnsserver.Directives)
		}
		return i
	}
	mcs := at("mcs")
	for _, before := range []string{"rewrite", "autopath", "acl", "loadbalance", "prometheus", "errors", "log"} {
		if at(before) > mcs {
			t.Errorf("%s runs after mcs", before)
		}
	}
	for _, after := range []string{"cache", "kubernetes", "forward"} {
		if at(after) < mcs {
			t.Errorf("%s runs before mcs", after)
		}
	}
}
