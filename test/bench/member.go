package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// shippedCorefile is the member Corefile users copy.
const shippedCorefile = "corefile/Corefile"

// leftOut are the plugins of the shipped Corefile the benchmark drops: they
// would reach outside the machine (forward, and loop through it), or bind
// fixed ports (health, prometheus); reload only rereads the file.
var leftOut = map[string]bool{"forward": true, "loop": true, "health": true, "prometheus": true, "reload": true}

// importedSlicesSelector is the shipped Corefile's labels option of the
// kubernetes plugin: it keeps the imported EndpointSlices, the bulk of a
// fleet's objects, out of that plugin's informers (the option applies to
// Services, EndpointSlices and Pods), and no other object carries the
// controller's managed-by value under this key.
var importedSlicesSelector = discoveryv1.LabelManagedBy + " notin (" + api.ManagedBy + ")"

// memberCorefileSet is the shipped Corefile made to run here, and its
// variants compared with it.
type memberCorefileSet struct {
	member string // the shipped Corefile
	stock  string // the stock kubeadm one: the same without the mcs stanza and the labels line
	all    string // the shipped one without its labels line: the kubernetes plugin reads every slice
}

// variant is what adapt changes beyond making a Corefile run here.
type variant struct {
	dropMCS    bool // leave the mcs stanza out
	dropLabels bool // leave the kubernetes plugin's labels line out
}

// memberCorefiles derives from the shipped Corefile the member Corefile
// processes of the benchmark. Each is made to run here: the server on a
// loopback port, ready on another, both plugins on the lab's kubeconfig,
// without the plugins of leftOut. The results are templates of
// writeCorefile.
func memberCorefiles(root string) (memberCorefileSet, error) {
	var set memberCorefileSet
	b, err := os.ReadFile(filepath.Join(root, shippedCorefile))
	if err != nil {
		return set, err
	}
	for _, v := range []struct {
		into *string
		v    variant
	}{{&set.member, variant{}}, {&set.stock, variant{dropMCS: true, dropLabels: true}}, {&set.all, variant{dropLabels: true}}} {
		if *v.into, err = adapt(string(b), v.v); err != nil {
			return set, err
		}
	}
	return set, nil
}

// adapt rewrites a Corefile of one server block, directive by directive.
func adapt(text string, v variant) (string, error) {
	var out strings.Builder
	depth, skip, sawMCS, sawLabels := 0, false, false, false
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		name := strings.Fields(trimmed)[0]
		opens, closes := strings.Count(trimmed, "{"), strings.Count(trimmed, "}")
		switch {
		case depth == 0 && opens == 1:
			out.WriteString(".:{{.Port}} {\n    bind 127.0.0.1\n")
		case depth == 1:
			skip = leftOut[name] || (name == "mcs" && v.dropMCS)
			sawMCS = sawMCS || name == "mcs"
			if !skip {
				out.WriteString(directive(name, line, v))
			}
		case !skip && depth == 2 && name == "cluster":
			out.WriteString("        cluster {{.Context}}\n")
		case !skip && depth == 2 && trimmed == "labels "+importedSlicesSelector:
			sawLabels = true
			if !v.dropLabels {
				out.WriteString(line)
			}
		case !skip:
			out.WriteString(line)
		}
		depth += opens - closes
	}
	if depth != 0 || !sawMCS || !sawLabels {
		return "", fmt.Errorf("%s: want one server block with an mcs stanza, and a kubernetes block with labels %s", shippedCorefile, importedSlicesSelector)
	}
	return out.String(), nil
}

// directive is the first line of a directive, made to run here.
func directive(name, line string, v variant) string {
	switch {
	case name == "ready":
		return "    ready 127.0.0.1:{{.ReadyPort}}\n"
	case name == "mcs" || name == "kubernetes":
		return line + "        kubeconfig {{.Kubeconfig}} {{.Context}}\n"
	}
	return line
}
