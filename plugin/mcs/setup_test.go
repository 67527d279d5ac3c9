package mcs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/plugin/pkg/fall"

	"github.com/coredns-mcs/coredns-mcs/api"
)

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: lab
  cluster: {server: "https://127.0.0.1:6443"}
- name: other
  cluster: {server: "https://127.0.0.2:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: member1
  context: {cluster: lab, user: u}
- name: member2
  context: {cluster: other, user: u}
current-context: member1
`

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func parseInput(input string, blockKeys ...string) (*config, error) {
	c := caddy.NewTestController("dns", input)
	c.ServerBlockKeys = blockKeys
	return parseCorefile(c)
}

func TestParseValid(t *testing.T) {
	kc := writeKubeconfig(t)
	tests := []struct {
		name, input string
		blockKeys   []string
		check       func(*config) string
	}{
		{"defaults", "mcs cluster.local clusterset.local", nil, func(c *config) string {
			return expect(c.zones[0] == "cluster.local." && c.zones[1] == "clusterset.local." && c.ttl == 5 &&
				c.answer == answerVIP && c.strategy == "" && c.cluster == "" && c.rest == nil && c.fall.Zones == nil)
		}},
		{"zones from the server block", "mcs", []string{"cluster.local:53", "clusterset.local:53"}, func(c *config) string {
			return expect(len(c.zones) == 2 && c.zones[0] == "cluster.local." && c.zones[1] == "clusterset.local.")
		}},
		{"zones inside the root block", "mcs cluster.local", []string{".:53"}, func(c *config) string {
			return expect(len(c.zones) == 1)
		}},
		{"zones are normalized", "mcs Cluster.Local ClusterSet.Local.", nil, func(c *config) string {
			return expect(c.zones[0] == "cluster.local." && c.zones[1] == clustersetZone)
		}},
		{"cluster", "mcs cluster.local {\n cluster member-1\n}", nil, func(c *config) string { return expect(c.cluster == "member-1") }},
		{"strategy RemoteAndLocal", "mcs cluster.local {\n strategy RemoteAndLocal\n}", nil, func(c *config) string {
			return expect(c.strategy == api.RemoteAndLocal)
		}},
		{"strategy LocalFirst", "mcs cluster.local {\n strategy LocalFirst\n}", nil, func(c *config) string {
			return expect(c.strategy == api.LocalFirst)
		}},
		{"answer endpoints", "mcs cluster.local {\n answer endpoints\n}", nil, func(c *config) string { return expect(c.answer == answerEndpoints) }},
		{"answer vip", "mcs cluster.local {\n answer vip\n}", nil, func(c *config) string { return expect(c.answer == answerVIP) }},
		{"ttl 0", "mcs cluster.local {\n ttl 0\n}", nil, func(c *config) string { return expect(c.ttl == 0) }},
		{"ttl 3600", "mcs cluster.local {\n ttl 3600\n}", nil, func(c *config) string { return expect(c.ttl == 3600) }},
		{"fallthrough all", "mcs cluster.local {\n fallthrough\n}", nil, func(c *config) string { return expect(c.fall.Equal(fall.Root)) }},
		{"fallthrough zone", "mcs cluster.local clusterset.local {\n fallthrough clusterset.local\n}", nil, func(c *config) string {
			return expect(len(c.fall.Zones) == 1 && c.fall.Zones[0] == "clusterset.local.")
		}},
		{"fallthrough subzone", "mcs clusterset.local {\n fallthrough demo.svc.clusterset.local\n}", nil, func(c *config) string {
			return expect(c.fall.Zones[0] == "demo.svc.clusterset.local.")
		}},
		{"kubeconfig", "mcs cluster.local {\n kubeconfig " + kc + "\n}", nil, func(c *config) string {
			return expect(c.rest != nil && c.rest.Host == "https://127.0.0.1:6443")
		}},
		{"kubeconfig context", "mcs cluster.local {\n kubeconfig " + kc + " member2\n}", nil, func(c *config) string {
			return expect(c.rest != nil && c.rest.Host == "https://127.0.0.2:6443")
		}},
		{"everything", "mcs cluster.local clusterset.local {\n kubeconfig " + kc + " member1\n cluster member1\n strategy LocalFirst\n answer endpoints\n ttl 30\n fallthrough\n}", nil, func(c *config) string {
			return expect(c.rest != nil && c.cluster == "member1" && c.strategy == api.LocalFirst && c.answer == answerEndpoints && c.ttl == 30 && len(c.fall.Zones) == 1)
		}},
		{"where", "mcs cluster.local", nil, func(c *config) string { return expect(c.where == "Testfile:1") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseInput(tc.input, tc.blockKeys...)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if msg := tc.check(cfg); msg != "" {
				t.Errorf("%s: config %+v", msg, cfg)
			}
		})
	}
}

func expect(ok bool) string {
	if ok {
		return ""
	}
	return "unexpected config"
}

func TestParseErrors(t *testing.T) {
	kc := writeKubeconfig(t)
	tests := []struct {
		name, input string
		blockKeys   []string
		want        []string // substrings of the error
	}{
		{"unknown option", "mcs cluster.local {\n endpoint https://x\n}", nil, []string{`unknown option "endpoint"`, "Testfile:2"}},
		{"duplicate option", "mcs cluster.local {\n ttl 5\n ttl 6\n}", nil, []string{`option "ttl" given more than once`, "Testfile:3"}},
		{"duplicate fallthrough", "mcs cluster.local {\n fallthrough\n fallthrough\n}", nil, []string{`option "fallthrough" given more than once`}},
		{"used twice", "mcs cluster.local\nmcs clusterset.local", nil, []string{"only be used once", "Testfile:2"}},
		{"no zones", "mcs", nil, []string{"no zones"}},
		{"root zone", "mcs .", nil, []string{"would claim every name"}},
		{"root block default", "mcs", []string{".:53"}, []string{"would claim every name"}},
		{"same zone twice", "mcs cluster.local cluster.local", nil, []string{"zones cluster.local. and cluster.local. clash"}},
		{"nested zones", "mcs cluster.local svc.cluster.local", nil, []string{"clash"}},
		{"parent after child", "mcs svc.cluster.local cluster.local", nil, []string{"clash"}},
		{"reverse zone", "mcs cluster.local 10.in-addr.arpa", nil, []string{"reverse zone"}},
		{"outside the block", "mcs clusterset.local", []string{"cluster.local:53"}, []string{"outside this server block"}},
		{"cluster without name", "mcs cluster.local {\n cluster\n}", nil, []string{"option cluster takes exactly one argument", "Testfile:2"}},
		{"cluster two names", "mcs cluster.local {\n cluster a b\n}", nil, []string{"option cluster takes exactly one argument"}},
		{"cluster bad name", "mcs cluster.local {\n cluster Member_1\n}", nil, []string{`option cluster: "Member_1" is not a valid cluster name`}},
		{"strategy missing", "mcs cluster.local {\n strategy\n}", nil, []string{"option strategy takes exactly one argument"}},
		{"strategy bad", "mcs cluster.local {\n strategy localfirst\n}", nil, []string{`option strategy must be RemoteAndLocal or LocalFirst, not "localfirst"`}},
		{"answer bad", "mcs cluster.local {\n answer both\n}", nil, []string{`option answer must be vip or endpoints, not "both"`}},
		{"answer missing", "mcs cluster.local {\n answer\n}", nil, []string{"option answer takes exactly one argument"}},
		{"ttl negative", "mcs cluster.local {\n ttl -1\n}", nil, []string{`option ttl must be an integer in 0..3600, not "-1"`}},
		{"ttl too big", "mcs cluster.local {\n ttl 3601\n}", nil, []string{"0..3600"}},
		{"ttl not a number", "mcs cluster.local {\n ttl 5s\n}", nil, []string{"0..3600"}},
		{"ttl missing", "mcs cluster.local {\n ttl\n}", nil, []string{"option ttl takes exactly one argument"}},
		{"kubeconfig missing", "mcs cluster.local {\n kubeconfig\n}", nil, []string{"option kubeconfig takes PATH [CONTEXT]"}},
		{"kubeconfig three args", "mcs cluster.local {\n kubeconfig a b c\n}", nil, []string{"option kubeconfig takes PATH [CONTEXT]"}},
		{"kubeconfig no file", "mcs cluster.local {\n kubeconfig /nonexistent/kubeconfig\n}", nil, []string{"option kubeconfig", "no such file"}},
		{"kubeconfig bad context", "mcs cluster.local {\n kubeconfig " + kc + " nope\n}", nil, []string{"option kubeconfig", `"nope"`}},
		{"fallthrough outside", "mcs cluster.local {\n fallthrough example.org\n}", nil, []string{"option fallthrough: zone example.org. is not within mcs zones"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseInput(tc.input, tc.blockKeys...)
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestSetupOutsideCluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	c := caddy.NewTestController("dns", "mcs cluster.local {\n cluster member1\n}")
	err := setup(c)
	if err == nil || !strings.Contains(err.Error(), "no kubeconfig option and not running in a cluster") || !strings.Contains(err.Error(), "Testfile:1") {
		t.Fatalf("want an in-cluster error naming the line, got %v", err)
	}
}

func TestSetupWithKubeconfig(t *testing.T) {
	c := caddy.NewTestController("dns", "mcs cluster.local {\n kubeconfig "+writeKubeconfig(t)+"\n cluster member1\n}")
	if err := setup(c); err != nil {
		t.Fatalf("setup: %v", err)
	}
}
