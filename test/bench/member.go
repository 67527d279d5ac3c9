package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// shippedCorefile is the member Corefile users copy.
const shippedCorefile = "corefile/Corefile"

// leftOut are the plugins of the shipped Corefile the benchmark drops: they
// would reach outside the machine (forward, and loop through it), or bind
// fixed ports (health, prometheus); reload only rereads the file.
var leftOut = map[string]bool{"forward": true, "loop": true, "health": true, "prometheus": true, "reload": true}

// memberCorefiles derives from the shipped Corefile the two sides of the
// member Corefile contest: the shipped one, and the stock kubeadm one, which
// is the same without the mcs stanza. Both are made to run here: the
// server on a loopback port, ready on another, both plugins on the lab's
// kubeconfig, without the plugins of leftOut. The result is a template of
// writeCorefile.
func memberCorefiles(root string) (member, stock string, err error) {
	b, err := os.ReadFile(filepath.Join(root, shippedCorefile))
	if err != nil {
		return "", "", err
	}
	member, err = adapt(string(b), true)
	if err != nil {
		return "", "", err
	}
	stock, err = adapt(string(b), false)
	return member, stock, err
}

// adapt rewrites a Corefile of one server block, directive by directive;
// keepMCS false drops the mcs stanza.
func adapt(text string, keepMCS bool) (string, error) {
	var out strings.Builder
	depth, skip, sawMCS := 0, false, false
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
			skip = leftOut[name] || (name == "mcs" && !keepMCS)
			sawMCS = sawMCS || name == "mcs"
			if !skip {
				out.WriteString(directive(name, line))
			}
		case !skip && depth == 2 && name == "cluster":
			out.WriteString("        cluster {{.Context}}\n")
		case !skip:
			out.WriteString(line)
		}
		depth += opens - closes
	}
	if depth != 0 || !sawMCS {
		return "", fmt.Errorf("%s: want one server block with an mcs stanza", shippedCorefile)
	}
	return out.String(), nil
}

// directive is the first line of a directive, made to run here.
func directive(name, line string) string {
	switch name {
	case "ready":
		return "    ready 127.0.0.1:{{.ReadyPort}}\n"
	case "mcs", "kubernetes":
		return line + "        kubeconfig {{.Kubeconfig}} {{.Context}}\n"
	}
	return line
}
