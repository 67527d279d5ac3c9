// The members' Helm values (deploy/helm/coredns-member1.values.yaml) for
// the CoreDNS project's own chart, held to what deploy/overlays/member1
// makes. The chart itself is not here to render: it is published only in
// its own chart repository and registry, which this project's machines
// cannot reach (no Go module, npm or Debian package carries it), and its
// code is not ours to copy. So this test holds each value to the overlay's
// object it stands for, and reads the values the way the chart documents
// them (its README and values.yaml): servers into the Corefile, image,
// replicaCount, resources, podDisruptionBudget, serviceAccount and rbac.
// What the chart makes of them beyond that is the chart's, and untested
// here; docs/install.md says so.

package deploy_test

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy/caddyfile"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const memberValuesFile = "helm/coredns-member1.values.yaml"

// memberValues is what the values file sets, as the CoreDNS chart names it.
type memberValues struct {
	Image struct {
		Repository, Tag string
	}
	ReplicaCount        int64  `json:"replicaCount"`
	K8sAppLabelOverride string `json:"k8sAppLabelOverride"`
	PriorityClassName   string `json:"priorityClassName"`
	Service             struct{ Name string }
	Resources           map[string]any `json:"resources"`
	Env                 []any          `json:"env"`
	PodDisruptionBudget map[string]any `json:"podDisruptionBudget"`
	ServiceAccount      struct {
		Create bool
		Name   string
	} `json:"serviceAccount"`
	RBAC struct {
		Create             bool
		MulticlusterEnable bool `json:"multiclusterEnable"`
	} `json:"rbac"`
	Servers []chartServer
}

// chartServer is a server block of the chart's servers value.
type chartServer struct {
	Zones []struct{ Zone, Scheme string }
	Port  int
	// Parameters are strings or numbers (cache 30), as YAML reads them.
	Plugins []struct {
		Name        string
		Parameters  any
		ConfigBlock string `json:"configBlock"`
	}
}

func readMemberValues(t *testing.T) memberValues {
	t.Helper()
	b, err := os.ReadFile(memberValuesFile)
	if err != nil {
		t.Fatal(err)
	}
	var v memberValues
	if err := yaml.UnmarshalStrict(b, &v); err != nil {
		t.Fatalf("%s: %v", memberValuesFile, err)
	}
	return v
}

// corefile is the Corefile the chart writes from servers, as its values.yaml
// documents the value: per server, its zones (scheme, zone, "." when unset)
// and :port, then each plugin with its parameters and its configBlock in
// braces.
func (v memberValues) corefile() string {
	var b strings.Builder
	for _, s := range v.Servers {
		var zones []string
		for _, z := range s.Zones {
			zones = append(zones, z.Scheme+cmpOr(z.Zone, "."))
		}
		if len(zones) == 0 {
			zones = []string{"."}
		}
		fmt.Fprintf(&b, "%s:%d {\n", strings.Join(zones, " "), s.Port)
		for _, p := range s.Plugins {
			line := strings.TrimSpace(p.Name + " " + fmt.Sprint(cmpOr[any](p.Parameters, "")))
			if p.ConfigBlock != "" {
				line += " {\n" + p.ConfigBlock + "\n}"
			}
			b.WriteString(line + "\n")
		}
		b.WriteString("}\n")
	}
	return b.String()
}

// cmpOr is v, or def when v is its zero value.
func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// serverBlocks is a Corefile as CoreDNS parses it: its server blocks'
// keys and each directive's tokens, without comments or layout.
func serverBlocks(t *testing.T, name, corefile string) string {
	t.Helper()
	j, err := caddyfile.ToJSON([]byte(corefile))
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, corefile)
	}
	return string(j)
}

// The values' servers make member1's Corefile, corefile/Corefile: the same
// server block, the mcs stanza naming member1 and every stock plugin, token
// for token.
func TestMemberValuesCorefile(t *testing.T) {
	v := readMemberValues(t)
	cm := find(t, render(t, "overlays/member1"), "ConfigMap", "coredns")
	want, _, _ := unstructured.NestedString(cm.Object, "data", "Corefile")
	got := v.corefile()
	if g, w := serverBlocks(t, memberValuesFile, got), serverBlocks(t, "overlays/member1", want); g != w {
		t.Errorf("the values' servers make the Corefile\n%s\nwhose blocks are\n%s\nwant overlays/member1's\n%s", got, g, w)
	}
	if !strings.Contains(got, "cluster member1\n") {
		t.Errorf("the values' Corefile names no cluster:\n%s", got)
	}
}

// The values run the overlay's image, replicas, resources, priority and
// labels, and its PodDisruptionBudget.
func TestMemberValuesDeployment(t *testing.T) {
	v := readMemberValues(t)
	objs := render(t, "overlays/member1")
	d := find(t, objs, "Deployment", "coredns")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	if image := v.Image.Repository + ":" + v.Image.Tag; image != c["image"] {
		t.Errorf("the values' image is %s, want the overlay's %v", image, c["image"])
	}
	replicas, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas")
	priority, _, _ := unstructured.NestedString(d.Object, "spec", "template", "spec", "priorityClassName")
	app := d.GetLabels()["k8s-app"]
	if !reflect.DeepEqual(asJSON(t, v.ReplicaCount), asJSON(t, replicas)) || v.PriorityClassName != priority || v.K8sAppLabelOverride != app || v.Service.Name != app {
		t.Errorf("the values run %d replicas of priority %q labelled k8s-app=%s behind Service %s; want %v, %q and %s as the overlay's",
			v.ReplicaCount, v.PriorityClassName, v.K8sAppLabelOverride, v.Service.Name, replicas, priority, app)
	}
	if !reflect.DeepEqual(asJSON(t, v.Resources), asJSON(t, c["resources"])) {
		t.Errorf("the values' resources are %v, want the overlay's %v", v.Resources, c["resources"])
	}
	// The chart's env value is the container's env: GOMEMLIMIT, say, goes
	// with the memory limit.
	if !reflect.DeepEqual(asJSON(t, v.Env), asJSON(t, c["env"])) {
		t.Errorf("the values' env is %v, want the overlay's %v", v.Env, c["env"])
	}
	pdb := find(t, objs, "PodDisruptionBudget", "coredns")
	spec, _, _ := unstructured.NestedMap(pdb.Object, "spec")
	delete(spec, "selector") // the chart selects its own pods
	if !reflect.DeepEqual(asJSON(t, v.PodDisruptionBudget), asJSON(t, spec)) {
		t.Errorf("the values' podDisruptionBudget is %v, want the overlay's %v", v.PodDisruptionBudget, spec)
	}
}

// asJSON is v as plain JSON values, whichever decoder read it.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// coreDNSChartRules are the rules of the ClusterRole the CoreDNS chart
// makes with rbac.create and rbac.multiclusterEnable, as its README
// documents the option: kubeadm's system:coredns rules, and list/watch of
// the MCS API's ServiceExports and ServiceImports.
var coreDNSChartRules = []rbacRule{
	{"", []string{"endpoints", "services", "pods", "namespaces"}, nil, []string{"list", "watch"}},
	{"discovery.k8s.io", []string{"endpointslices"}, nil, []string{"list", "watch"}},
	{"multicluster.x-k8s.io", []string{"serviceexports", "serviceimports"}, nil, []string{"list", "watch"}},
}

// rbacRule is one group's resources, names and verbs of a PolicyRule.
type rbacRule struct {
	group     string
	resources []string
	names     []string
	verbs     []string
}

// covers reports whether one of rules grants verb on resource in group.
func covers(rules []rbacRule, group, resource, verb string) bool {
	return slices.ContainsFunc(rules, func(r rbacRule) bool {
		return r.group == group && slices.Contains(r.resources, resource) && r.names == nil && slices.Contains(r.verbs, verb)
	})
}

// CoreDNS installed by the chart with the values may do what the overlay's
// system:coredns lets it: every rule but the ClusterProperty's, which mcs
// reads only when the Corefile names no cluster; and the Role coredns-mcs
// (deploy/member/coredns-rbac.yaml, applied beside the chart) binds the
// chart's ServiceAccount.
func TestMemberValuesRBAC(t *testing.T) {
	v := readMemberValues(t)
	if !v.RBAC.Create || !v.RBAC.MulticlusterEnable {
		t.Fatalf("rbac %+v: want create and multiclusterEnable, which grant mcs its ServiceImports", v.RBAC)
	}
	objs := render(t, "overlays/member1")
	rules, _, _ := unstructured.NestedSlice(find(t, objs, "ClusterRole", "system:coredns").Object, "rules")
	for _, r := range rules {
		var rule struct {
			APIGroups, Resources, ResourceNames, Verbs []string
		}
		decode(t, r, &rule)
		if slices.Contains(rule.Resources, "clusterproperties") {
			continue // TestMemberValuesCorefile: the Corefile names member1
		}
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				for _, verb := range rule.Verbs {
					if !covers(coreDNSChartRules, g, res, verb) {
						t.Errorf("the chart's ClusterRole does not grant %s of %s.%s, which the overlay's system:coredns does", verb, res, g)
					}
				}
			}
		}
	}
	binding := find(t, objs, "RoleBinding", "coredns-mcs")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	s := subjects[0].(map[string]any)
	if !v.ServiceAccount.Create || v.ServiceAccount.Name != s["name"] || s["namespace"] != "kube-system" {
		t.Errorf("the values' ServiceAccount is %+v, in the release's namespace; the Role coredns-mcs binds %v/%v", v.ServiceAccount, s["namespace"], s["name"])
	}
}
