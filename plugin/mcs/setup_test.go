package mcs

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/ready"
	"github.com/coredns/coredns/plugin/test"
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

// fields is a config as field name → value, for comparisons that name
// the field that differs.
func fields(c *config) map[string]string {
	host := "in-cluster"
	if c.rest != nil {
		host = c.rest.Host
	}
	return map[string]string{
		"zones":       strings.Join(c.zones, " "),
		"api server":  host,
		"cluster":     c.cluster,
		"strategy":    string(c.strategy),
		"answer":      string(c.answer),
		"ttl":         strconv.Itoa(int(c.ttl)),
		"fallthrough": strings.Join(c.fall.Zones, " "),
		"where":       c.where,
	}
}

func TestParseValid(t *testing.T) {
	kc := writeKubeconfig(t)
	defaults := map[string]string{
		"zones": "cluster.local.", "api server": "in-cluster", "cluster": "", "strategy": "",
		"answer": "vip", "ttl": "5", "fallthrough": "", "where": "Testfile:1",
	}
	tests := []struct {
		name, input string
		blockKeys   []string
		want        map[string]string // the fields that differ from defaults
	}{
		{"defaults", "mcs cluster.local clusterset.local", nil, map[string]string{"zones": "cluster.local. clusterset.local."}},
		{"zones from the server block", "mcs", []string{"cluster.local:53", "clusterset.local:53"}, map[string]string{"zones": "cluster.local. clusterset.local."}},
		{"zones inside the root block", "mcs cluster.local", []string{".:53"}, nil},
		{"zones are normalized", "mcs Cluster.Local ClusterSet.Local.", nil, map[string]string{"zones": "cluster.local. clusterset.local."}},
		{"cluster", "mcs cluster.local {\n cluster member-1\n}", nil, map[string]string{"cluster": "member-1"}},
		{"strategy RemoteAndLocal", "mcs cluster.local {\n strategy RemoteAndLocal\n}", nil, map[string]string{"strategy": "RemoteAndLocal"}},
		{"strategy LocalFirst", "mcs cluster.local {\n strategy LocalFirst\n}", nil, map[string]string{"strategy": "LocalFirst"}},
		{"answer endpoints", "mcs cluster.local {\n answer endpoints\n}", nil, map[string]string{"answer": "endpoints"}},
		{"answer vip", "mcs cluster.local {\n answer vip\n}", nil, nil},
		{"ttl 0", "mcs cluster.local {\n ttl 0\n}", nil, map[string]string{"ttl": "0"}},
		{"ttl 3600", "mcs cluster.local {\n ttl 3600\n}", nil, map[string]string{"ttl": "3600"}},
		{"fallthrough all", "mcs cluster.local {\n fallthrough\n}", nil, map[string]string{"fallthrough": "."}},
		{"fallthrough zone", "mcs cluster.local clusterset.local {\n fallthrough clusterset.local\n}", nil,
			map[string]string{"zones": "cluster.local. clusterset.local.", "fallthrough": "clusterset.local."}},
		{"fallthrough subzone", "mcs clusterset.local {\n fallthrough demo.svc.clusterset.local\n}", nil,
			map[string]string{"zones": "clusterset.local.", "fallthrough": "demo.svc.clusterset.local."}},
		{"kubeconfig", "mcs cluster.local {\n kubeconfig " + kc + "\n}", nil, map[string]string{"api server": "https://127.0.0.1:6443"}},
		{"kubeconfig context", "mcs cluster.local {\n kubeconfig " + kc + " member2\n}", nil, map[string]string{"api server": "https://127.0.0.2:6443"}},
		{"everything", "mcs cluster.local clusterset.local {\n kubeconfig " + kc + " member1\n cluster member1\n strategy LocalFirst\n answer endpoints\n ttl 30\n fallthrough\n}", nil,
			map[string]string{"zones": "cluster.local. clusterset.local.", "api server": "https://127.0.0.1:6443", "cluster": "member1",
				"strategy": "LocalFirst", "answer": "endpoints", "ttl": "30", "fallthrough": "."}},
		{"reverse zones", "mcs cluster.local clusterset.local in-addr.arpa ip6.arpa", []string{".:53"},
			map[string]string{"zones": "cluster.local. clusterset.local. in-addr.arpa. ip6.arpa."}},
		{"where", "\n\nmcs cluster.local", nil, map[string]string{"where": "Testfile:3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseInput(tc.input, tc.blockKeys...)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			want := maps.Clone(defaults)
			maps.Copy(want, tc.want)
			got := fields(cfg)
			for _, k := range slices.Sorted(maps.Keys(want)) {
				if got[k] != want[k] {
					t.Errorf("%s = %q, want %q", k, got[k], want[k])
				}
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	kc := writeKubeconfig(t)
	tests := []struct {
		name, input string
		blockKeys   []string
		want        []string // substrings of the error: what is wrong, the option, the line
	}{
		{"unknown option", "mcs cluster.local {\n endpoint https://x\n}", nil, []string{`unknown option "endpoint"`, "Testfile:2"}},
		{"duplicate option", "mcs cluster.local {\n ttl 5\n ttl 6\n}", nil, []string{`option "ttl" given more than once`, "Testfile:3"}},
		{"duplicate fallthrough", "mcs cluster.local {\n fallthrough\n fallthrough\n}", nil, []string{`option "fallthrough" given more than once`, "Testfile:3"}},
		{"used twice", "mcs cluster.local\nmcs clusterset.local", nil, []string{"only be used once", "Testfile:2"}},
		{"no zones", "mcs", nil, []string{"no zones", "Testfile:1"}},
		{"root zone", "mcs .", nil, []string{"would claim every name", "Testfile:1"}},
		{"root block default", "mcs", []string{".:53"}, []string{"would claim every name", "Testfile:1"}},
		{"same zone twice", "mcs cluster.local cluster.local", nil, []string{"zones cluster.local. and cluster.local. clash", "Testfile:1"}},
		{"nested zones", "mcs cluster.local svc.cluster.local", nil, []string{"zones cluster.local. and svc.cluster.local. clash", "Testfile:1"}},
		{"parent after child", "mcs svc.cluster.local cluster.local", nil, []string{"zones svc.cluster.local. and cluster.local. clash", "Testfile:1"}},
		{"reverse zone without clusterset", "mcs cluster.local 10.in-addr.arpa", nil, []string{"reverse zone 10.in-addr.arpa. needs zone clusterset.local. as well", "Testfile:1"}},
		{"outside the block", "mcs clusterset.local", []string{"cluster.local:53"}, []string{"zone clusterset.local. is outside this server block", "Testfile:1"}},
		{"cluster without name", "mcs cluster.local {\n cluster\n}", nil, []string{"option cluster takes exactly one argument", "Testfile:2"}},
		{"cluster two names", "mcs cluster.local {\n cluster a b\n}", nil, []string{"option cluster takes exactly one argument", "Testfile:2"}},
		{"cluster bad name", "mcs cluster.local {\n cluster Member_1\n}", nil, []string{`option cluster: "Member_1" is not a valid cluster name`, "Testfile:2"}},
		{"strategy missing", "mcs cluster.local {\n strategy\n}", nil, []string{"option strategy takes exactly one argument", "Testfile:2"}},
		{"strategy bad", "mcs cluster.local {\n strategy localfirst\n}", nil, []string{`option strategy must be RemoteAndLocal or LocalFirst, not "localfirst"`, "Testfile:2"}},
		{"answer bad", "mcs cluster.local {\n answer both\n}", nil, []string{`option answer must be vip or endpoints, not "both"`, "Testfile:2"}},
		{"answer missing", "mcs cluster.local {\n answer\n}", nil, []string{"option answer takes exactly one argument", "Testfile:2"}},
		{"ttl negative", "mcs cluster.local {\n ttl -1\n}", nil, []string{`option ttl must be an integer in 0..3600, not "-1"`, "Testfile:2"}},
		{"ttl too big", "mcs cluster.local {\n ttl 3601\n}", nil, []string{`option ttl must be an integer in 0..3600, not "3601"`, "Testfile:2"}},
		{"ttl not a number", "mcs cluster.local {\n ttl 5s\n}", nil, []string{`option ttl must be an integer in 0..3600, not "5s"`, "Testfile:2"}},
		{"ttl missing", "mcs cluster.local {\n ttl\n}", nil, []string{"option ttl takes exactly one argument", "Testfile:2"}},
		{"kubeconfig missing", "mcs cluster.local {\n kubeconfig\n}", nil, []string{"option kubeconfig takes PATH [CONTEXT]", "Testfile:2"}},
		{"kubeconfig three args", "mcs cluster.local {\n kubeconfig a b c\n}", nil, []string{"option kubeconfig takes PATH [CONTEXT]", "Testfile:2"}},
		{"kubeconfig no file", "mcs cluster.local {\n kubeconfig /nonexistent/kubeconfig\n}", nil, []string{"option kubeconfig", "no such file", "Testfile:2"}},
		{"kubeconfig bad context", "mcs cluster.local {\n kubeconfig " + kc + " nope\n}", nil, []string{"option kubeconfig", `"nope"`, "Testfile:2"}},
		{"fallthrough outside", "mcs cluster.local {\n fallthrough example.org\n}", nil, []string{"option fallthrough: zone example.org. is not within mcs zones", "Testfile:2"}},
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
	c := caddy.NewTestController("dns", "mcs cluster.local {\n kubeconfig "+writeKubeconfig(t)+" member2\n cluster member1\n ttl 7\n}")
	if err := setup(c); err != nil {
		t.Fatalf("setup: %v", err)
	}
	plugins := dnsserver.GetConfig(c).Plugin
	if len(plugins) != 1 {
		t.Fatalf("setup added %d plugins, want 1", len(plugins))
	}
	m, ok := plugins[0](nil).(*MCS)
	if !ok {
		t.Fatalf("setup added %T, want *MCS", plugins[0](nil))
	}
	got := fields(m.cfg)
	for k, want := range map[string]string{"zones": "cluster.local.", "api server": "https://127.0.0.2:6443", "cluster": "member1", "ttl": "7"} {
		if got[k] != want {
			t.Errorf("%s = %q, want %q", k, got[k], want)
		}
	}
	if m.watcher == nil || m.idx == nil || m.watcher.idx != m.idx || m.watcher.cl.host != "https://127.0.0.2:6443" {
		t.Errorf("the watcher must feed the plugin's index from the kubeconfig's API server")
	}
}

// readyPeers finds the server's other plugins that say when they are
// ready, as the ready plugin does, and not mcs itself.
func TestReadyPeers(t *testing.T) {
	m := &MCS{}
	other := test.HandlerFunc(answerFromNext)
	peer := &readyHandler{other, &readiness{}}
	if got := readyPeers([]plugin.Handler{other, m, peer}, m); len(got) != 1 || got[0] != ready.Readiness(peer) {
		t.Fatalf("ready peers %v, want the one other plugin with Ready", got)
	}
}

// readyHandler is a plugin that says when it is ready.
type readyHandler struct {
	plugin.Handler
	*readiness
}
