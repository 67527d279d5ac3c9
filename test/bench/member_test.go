package main

import (
	"strings"
	"testing"
)

func TestMemberCorefiles(t *testing.T) {
	set, err := memberCorefiles("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, text string
		mcs        bool
	}{{"member", set.member, true}, {"stock", set.stock, false}, {"member-all", set.all, true}} {
		t.Run(c.name, func(t *testing.T) {
			for _, want := range []string{".:{{.Port}} {\n    bind 127.0.0.1\n", "    ready 127.0.0.1:{{.ReadyPort}}\n", "    cache 30", "    loadbalance\n",
				"    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        kubeconfig {{.Kubeconfig}} {{.Context}}\n"} {
				if !strings.Contains(c.text, want) {
					t.Errorf("no %q in\n%s", want, c.text)
				}
			}
			for _, gone := range []string{"forward", "loop", "health", "prometheus", "reload", "#", "member1"} {
				if strings.Contains(c.text, gone) {
					t.Errorf("%q left in\n%s", gone, c.text)
				}
			}
			hasMCS := strings.Contains(c.text, "    mcs cluster.local clusterset.local in-addr.arpa ip6.arpa {\n        kubeconfig {{.Kubeconfig}} {{.Context}}\n        cluster {{.Context}}\n")
			if hasMCS != c.mcs {
				t.Errorf("mcs stanza present %t, want %t, in\n%s", hasMCS, c.mcs, c.text)
			}
			hasLabels := strings.Contains(c.text, "        kubeconfig {{.Kubeconfig}} {{.Context}}\n       labels endpointslice.kubernetes.io/managed-by notin (mcs-controller.coredns-mcs.io)\n")
			if want := c.name == "member"; hasLabels != want || strings.Count(c.text, "labels") != btoi(want) {
				t.Errorf("labels selector present %t, want %t, in\n%s", hasLabels, want, c.text)
			}
			if strings.Count(c.text, "{") != strings.Count(c.text, "}") {
				t.Errorf("unbalanced braces in\n%s", c.text)
			}
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
