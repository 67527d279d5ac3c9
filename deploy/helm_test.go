// The hub's Helm chart (deploy/helm/coredns-mcs-controller), rendered with
// Helm's Go SDK as `helm template` does, and held equal to the kustomize
// overlay and components it packages: a change to one side only fails here.

package deploy_test

import (
	"encoding/json"
	"io"
	"log"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

const (
	// hubChart is the chart, relative to deploy/.
	hubChart = "helm/coredns-mcs-controller"
	// release and its namespace are what the docs install: helm install
	// mcs-controller … -n mcs-system --create-namespace.
	release          = "mcs-controller"
	releaseNamespace = "mcs-system"
)

// labKube is the Kubernetes version the chart is rendered for: the lab's.
var labKube = &chartutil.KubeVersion{Version: "v1.36.3", Major: "1", Minor: "36"}

// renderChart is helm template of the chart with vals, CRDs included, as
// the objects it would install into namespace.
func renderChart(t *testing.T, namespace string, vals map[string]any) []*unstructured.Unstructured {
	t.Helper()
	manifest, err := templateChart(namespace, vals)
	if err != nil {
		t.Fatalf("helm template %s: %v", hubChart, err)
	}
	return decodeManifests(t, manifest)
}

// templateChart renders the chart client-side with Helm's SDK, as
// `helm template --include-crds` does, and returns its manifest.
func templateChart(namespace string, vals map[string]any) (string, error) {
	chrt, err := loadChart()
	if err != nil {
		return "", err
	}
	install := action.NewInstall(&action.Configuration{})
	install.ClientOnly, install.DryRun, install.IncludeCRDs = true, true, true
	install.ReleaseName, install.Namespace, install.KubeVersion = release, namespace, labKube
	rel, err := install.Run(chrt, vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// loadChart loads the chart directory as helm does. Helm logs each link it
// follows (TestHubChartLinksDeploysFiles says which and why), every time:
// not in the tests' output.
func loadChart() (*chart.Chart, error) {
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard)
	return loader.Load(hubChart)
}

// decodeManifests splits a Helm manifest into its objects, in Helm's order.
func decodeManifests(t *testing.T, manifest string) []*unstructured.Unstructured {
	t.Helper()
	docs := releaseutil.SplitManifests(manifest)
	var objs []*unstructured.Unstructured
	for _, key := range releaseutil.BySplitManifestsOrder(slices.Collect(maps.Keys(docs))) {
		u := &unstructured.Unstructured{}
		if err := utilyaml.Unmarshal([]byte(docs[key]), &u.Object); err != nil {
			t.Fatalf("decoding the chart's %s: %v", key, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
	return objs
}

// renderHubWith is the hub overlay with these components of
// deploy/components added, as an operator's overlay adds them.
func renderHubWith(t *testing.T, components ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	// kustomize takes no absolute paths: each is relative to dir.
	abs := func(rel string) string {
		p, err := filepath.Abs(rel)
		if err == nil {
			p, err = filepath.Rel(dir, p)
		}
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := "resources:\n- " + abs("overlays/hub") + "\ncomponents:\n"
	for _, c := range components {
		k += "- " + abs("components/"+c) + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return render(t, dir)
}

// chartCase is a set of the chart's values and the kustomize components
// that make the same objects.
type chartCase struct {
	name       string
	values     map[string]any
	components []string
}

var chartCases = []chartCase{
	{"defaults", nil, nil},
	{"shards", map[string]any{"shards": map[string]any{"enabled": true}}, []string{"shards"}},
	{"network-policy", map[string]any{"networkPolicy": map[string]any{"enabled": true}}, []string{"network-policy"}},
	{"monitoring", map[string]any{"monitoring": map[string]any{"enabled": true}}, []string{"monitoring-hub"}},
	{"cluster-profiles", map[string]any{"clusterProfiles": map[string]any{"enabled": true}}, []string{"cluster-profiles"}},
	{"all", map[string]any{
		"shards":          map[string]any{"enabled": true},
		"networkPolicy":   map[string]any{"enabled": true},
		"monitoring":      map[string]any{"enabled": true},
		"clusterProfiles": map[string]any{"enabled": true},
	}, []string{"network-policy", "shards", "monitoring-hub", "cluster-profiles"}},
}

// The chart with each set of values installs exactly what the hub overlay
// with the same components applies: the same kinds, names and namespaces,
// and every field the same. What differs by design, and is all that
// sameObjects forgives:
//
//   - the Namespace: a Helm release goes into a namespace that exists
//     (helm install -n mcs-system --create-namespace) and never deletes it;
//   - labels: every object of the release (the CRD aside, which Helm
//     installs from crds/ untouched) carries the controller's two labels
//     and Helm's four (app.kubernetes.io/instance, managed-by, version,
//     helm.sh/chart), which the overlay gives only to deploy/controller's
//     objects, and the components' objects not at all.
func TestHubChartIsTheOverlay(t *testing.T) {
	for _, c := range chartCases {
		t.Run(c.name, func(t *testing.T) {
			sameObjects(t, renderChart(t, releaseNamespace, c.values), renderHubWith(t, c.components...))
		})
	}
}

// Also the example overlay with every component is the chart with every
// opt-in on.
func TestHubChartIsTheExampleWithComponents(t *testing.T) {
	all := chartCases[len(chartCases)-1]
	sameObjects(t, renderChart(t, releaseNamespace, all.values), render(t, "examples/hub-with-components"))
}

// objectKey names an object by kind, namespace and name.
func objectKey(u *unstructured.Unstructured) string {
	return u.GetKind() + " " + strings.TrimPrefix(u.GetNamespace()+"/"+u.GetName(), "/")
}

// sameObjects fails unless the chart's objects are the overlay's, but for
// the differences by design of TestHubChartIsTheOverlay.
func sameObjects(t *testing.T, chart, overlay []*unstructured.Unstructured) {
	t.Helper()
	want := map[string]*unstructured.Unstructured{}
	for _, u := range overlay {
		if u.GetKind() != "Namespace" {
			want[objectKey(u)] = u
		}
	}
	got := map[string]*unstructured.Unstructured{}
	for _, u := range chart {
		got[objectKey(u)] = u
	}
	for _, key := range slices.Sorted(maps.Keys(want)) {
		if _, ok := got[key]; !ok {
			t.Errorf("the chart has no %s, which the overlay has", key)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(got)) {
		w, ok := want[key]
		if !ok {
			t.Errorf("the chart has %s, which the overlay has not", key)
			continue
		}
		if diff := cmp.Diff(plainObject(t, w, false), plainObject(t, got[key], true)); diff != "" {
			t.Errorf("%s differs from the overlay's (-overlay +chart):\n%s", key, diff)
		}
	}
}

// chartLabels are the labels the chart puts on every object of a release
// of it, besides the overlay's.
func chartLabels(t *testing.T) map[string]string {
	t.Helper()
	chrt, err := loadChart()
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"app.kubernetes.io/name":       "mcs-controller",
		"app.kubernetes.io/part-of":    "coredns-mcs",
		"app.kubernetes.io/instance":   release,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/version":    chrt.Metadata.AppVersion,
		"helm.sh/chart":                chrt.Metadata.Name + "-" + chrt.Metadata.Version,
	}
}

// plainObject is u as plain JSON values (the two renderers decode numbers
// differently), with the overlay's labels given the chart's (fromOverlay)
// where the chart labels its objects: see TestHubChartIsTheOverlay.
func plainObject(t *testing.T, u *unstructured.Unstructured, fromChart bool) map[string]any {
	t.Helper()
	u = u.DeepCopy()
	if !fromChart && u.GetKind() != "CustomResourceDefinition" {
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		maps.Copy(labels, chartLabels(t))
		u.SetLabels(labels)
	}
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// The chart refuses shards that a replica's loss would leave unheld, as
// deploy/README.md's rule says (maxShards × (count − 1) ≥ count), and
// counts below one by its schema, and takes the counts it is given.
func TestHubChartShards(t *testing.T) {
	for _, s := range []struct {
		count, max int
		says       string
	}{{2, 1, "leaves a shard unheld"}, {4, 1, "leaves a shard unheld"}, {1, 2, "leaves a shard unheld"}, {0, 2, "/shards/count"}, {3, 0, "/shards/maxShards"}} {
		_, err := templateChart(releaseNamespace, map[string]any{"shards": map[string]any{"enabled": true, "count": s.count, "maxShards": s.max}})
		if err == nil || !strings.Contains(err.Error(), s.says) {
			t.Errorf("shards count %d, maxShards %d: %v, want refused, saying %q", s.count, s.max, err, s.says)
		}
	}
	objs := renderChart(t, releaseNamespace, map[string]any{"shards": map[string]any{"enabled": true, "count": 6, "maxShards": 2}})
	d := find(t, objs, "Deployment", "mcs-controller")
	replicas, _, _ := unstructured.NestedInt64(d.Object, "spec", "replicas")
	args := containerArgs(t, d)
	if replicas != 6 || !slices.Contains(args, "--shards=6") || !slices.Contains(args, "--max-shards=2") {
		t.Errorf("6 shards: %d replicas, args %v; want 6, --shards=6 and --max-shards=2", replicas, args)
	}
	rules, _, _ := unstructured.NestedSlice(find(t, objs, "Role", "mcs-controller").Object, "rules")
	names, _, _ := unstructured.NestedStringSlice(rules[len(rules)-1].(map[string]any), "resourceNames")
	if len(names) != 6 || names[5] != "mcs-controller-shard-5" {
		t.Errorf("6 shards: the Role's last rule names the Leases %v, want mcs-controller-shard-0 to -5", names)
	}
}

// at is the value at path in v, through maps by key and lists by index.
func at(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

// containerArgs are the args of the Deployment's one container.
func containerArgs(t *testing.T, d *unstructured.Unstructured) []string {
	t.Helper()
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if len(containers) != 1 {
		t.Fatalf("%s has %d containers, want 1", d.GetName(), len(containers))
	}
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	return args
}

// What an operator sets lands where the docs say: the image by digest, more
// flags after the chart's, other names for a second release, and the
// monitoring labels a Prometheus selects by.
func TestHubChartValues(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	objs := renderChart(t, "hub-system", map[string]any{
		"image":            map[string]any{"repository": "reg.test/mcs-controller", "tag": "v1", "digest": digest, "pullPolicy": "Always"},
		"imagePullSecrets": []any{map[string]any{"name": "pull"}},
		"nodeSelector":     map[string]any{"pool": "system"},
		"tolerations":      []any{map[string]any{"key": "dedicated", "operator": "Exists"}},
		"podAnnotations":   map[string]any{"note": "x"},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}}}}},
		}}},
		"podSecurityContext": map[string]any{"runAsUser": nil, "runAsGroup": nil},
		"securityContext":    map[string]any{"capabilities": nil},
		"logFormat":          "json",
		"extraArgs":          []any{"--watch-namespaces=shop,web"},
		"fullnameOverride":   "second",
		"monitoring":         map[string]any{"enabled": true, "labels": map[string]any{"release": "kps"}},
	})
	d := find(t, objs, "Deployment", "second")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if image := containers[0].(map[string]any)["image"]; image != "reg.test/mcs-controller@"+digest {
		t.Errorf("image %v, want it by digest", image)
	}
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template")
	for path, want := range map[string]string{
		"spec.containers.0.imagePullPolicy": "Always", "spec.imagePullSecrets.0.name": "pull",
		"spec.nodeSelector.pool": "system", "spec.tolerations.0.key": "dedicated", "metadata.annotations.note": "x",
		"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms.0.matchExpressions.0.key": "pool",
	} {
		if got := at(pod, strings.Split(path, ".")...); got != want {
			t.Errorf("the pod template's %s is %v, want %s", path, got, want)
		}
	}
	if args := containerArgs(t, d); args[len(args)-1] != "--watch-namespaces=shop,web" || !slices.Contains(args, "--logging-format=json") {
		t.Errorf("args %v, want --logging-format=json, and --watch-namespaces=shop,web last", args)
	}
	// The security contexts are the chart's, less what the values remove
	// with null, as helm merges them: the user and group, which OpenShift
	// assigns itself, and here the capabilities.
	if sc := pod["spec"].(map[string]any)["securityContext"]; !reflect.DeepEqual(sc, map[string]any{"runAsNonRoot": true, "seccompProfile": map[string]any{"type": "RuntimeDefault"}}) {
		t.Errorf("the pod's securityContext is %v, want the values'", sc)
	}
	if sc := at(pod, "spec", "containers", "0", "securityContext"); !reflect.DeepEqual(sc, map[string]any{"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true}) {
		t.Errorf("the container's securityContext is %v, want the values'", sc)
	}
	for _, u := range objs {
		if u.GetKind() != "CustomResourceDefinition" && u.GetNamespace() != "hub-system" && u.GetNamespace() != "" {
			t.Errorf("%s is not in the release's namespace hub-system", objectKey(u))
		}
	}
	binding := find(t, objs, "ClusterRoleBinding", "second")
	subjects, _, _ := unstructured.NestedSlice(binding.Object, "subjects")
	if s := subjects[0].(map[string]any); s["name"] != "second" || s["namespace"] != "hub-system" {
		t.Errorf("the ClusterRoleBinding binds %v, want hub-system/second", s)
	}
	// The PrometheusRule keeps the component's name, which the alerts'
	// tests read it by.
	for _, u := range []*unstructured.Unstructured{find(t, objs, "ServiceMonitor", "second"), find(t, objs, "PrometheusRule", "mcs-controller")} {
		if l := u.GetLabels(); l["release"] != "kps" {
			t.Errorf("%s labels %v, want release: kps", objectKey(u), l)
		}
	}
}

// The chart's CRD, alerts and dashboard are links to deploy/'s files, not
// copies, so that make generate and the alerts' tests reach them; Helm
// follows a link when it loads a chart directory and packages its target.
func TestHubChartLinksDeploysFiles(t *testing.T) {
	for link, target := range map[string]string{
		"crds/mcs.coredns-mcs.io_multiclusterservices.yaml": "crds/mcs.coredns-mcs.io_multiclusterservices.yaml",
		"files/prometheusrule.yaml":                         "components/monitoring-hub/prometheusrule.yaml",
		"files/dashboard.json":                              "components/monitoring-hub/dashboard.json",
		"files/multicluster.x-k8s.io_clusterprofiles.yaml":  "cluster-inventory/multicluster.x-k8s.io_clusterprofiles.yaml",
	} {
		path := filepath.Join(hubChart, link)
		got, err := filepath.EvalSymlinks(path)
		want, _ := filepath.Abs(target)
		if abs, _ := filepath.Abs(got); err != nil || abs != want {
			t.Errorf("%s resolves to %s (%v), want a link to deploy/%s", path, got, err, target)
		}
	}
}

// helm lint --strict passes with the defaults and with every opt-in on: a
// chart that renders can still carry what lint warns of. Its notes (INFO:
// the chart has no icon, as the project has none) are no failure.
func TestHubChartLints(t *testing.T) {
	defer log.SetOutput(log.Writer())
	log.SetOutput(io.Discard) // the links, as in loadChart
	for _, c := range []chartCase{chartCases[0], chartCases[len(chartCases)-1]} {
		lint := action.NewLint()
		lint.Strict, lint.Namespace, lint.KubeVersion = true, releaseNamespace, labKube
		res := lint.Run([]string{hubChart}, c.values)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("helm lint --strict, %s values: %s", c.name, m)
			}
		}
		if len(res.Errors) > 0 && len(res.Messages) == 0 {
			t.Errorf("helm lint --strict, %s values: %v", c.name, res.Errors)
		}
	}
}

// The chart's values.schema.json refuses a value of the wrong type or
// outside its range, and a key the chart does not know (a typo would
// otherwise be ignored), saying where; every value the tests above render
// passes it.
func TestHubChartSchema(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		says   string
	}{
		{map[string]any{"replicas": "2"}, "/replicas"},
		{map[string]any{"replicas": 0}, "/replicas"},
		{map[string]any{"replica": 2}, "replica"},
		{map[string]any{"image": map[string]any{"digest": "latest"}}, "/image/digest"},
		{map[string]any{"extraArgs": "--watch-namespaces=shop"}, "/extraArgs"},
		{map[string]any{"nodeSelector": map[string]any{"pool": 1}}, "/nodeSelector/pool"},
		{map[string]any{"affinity": map[string]any{"nodeAfinity": map[string]any{}}}, "nodeAfinity"},
		{map[string]any{"podSecurityContext": map[string]any{"runAsUser": "nobody"}}, "/podSecurityContext/runAsUser"},
		{map[string]any{"securityContext": map[string]any{"readOnlyRootFilesystem": "yes"}}, "/securityContext/readOnlyRootFilesystem"},
		{map[string]any{"logFormat": "xml"}, "/logFormat"},
		{map[string]any{"shards": map[string]any{"enabled": "true"}}, "/shards/enabled"},
		{map[string]any{"networkPolicy": map[string]any{"apiServerPorts": []any{"6443"}}}, "/networkPolicy/apiServerPorts/0"},
		{map[string]any{"monitoring": map[string]any{"interval": 30}}, "/monitoring/interval"},
		{map[string]any{"monitoring": map[string]any{"alerts": map[string]any{"MCSPropagationSlow": map[string]any{"for": "half an hour"}}}}, "/monitoring/alerts/MCSPropagationSlow/for"},
		{map[string]any{"monitoring": map[string]any{"alerts": map[string]any{"MCSPropagationSlow": map[string]any{"threshold": 5}}}}, "threshold"},
	} {
		_, err := templateChart(releaseNamespace, tc.values)
		if err == nil || !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("values %v: %v, want refused by the schema at %s", tc.values, err, tc.says)
		}
	}
}

// monitoring.alerts overrides what an alert of the shipped PrometheusRule
// says, its threshold with its expr, and nothing else of it or of the
// other alerts; a name that is no alert is refused, naming the alerts.
func TestHubChartAlertOverrides(t *testing.T) {
	const expr = "histogram_quantile(0.99, sum by (le) (rate(mcs_propagation_seconds_bucket[10m]))) > 5"
	plain := alertRules(t, nil)
	over := alertRules(t, map[string]any{"MCSPropagationSlow": map[string]any{"expr": expr, "for": "30m", "labels": map[string]any{"severity": "info"}}})
	want := plain["MCSPropagationSlow"]
	want["expr"], want["for"] = expr, "30m"
	want["labels"].(map[string]any)["severity"] = "info"
	if diff := cmp.Diff(plain, over); diff != "" {
		t.Errorf("the alerts with MCSPropagationSlow overridden (-want +got):\n%s", diff)
	}
	_, err := templateChart(releaseNamespace, map[string]any{"monitoring": map[string]any{"enabled": true, "alerts": map[string]any{"MCSPropagationSlower": map[string]any{"for": "1h"}}}})
	if err == nil || !strings.Contains(err.Error(), "monitoring.alerts.MCSPropagationSlower: no such alert") || !strings.Contains(err.Error(), "MCSPropagationSlow,") {
		t.Errorf("an override of no alert: %v, want refused, naming the alerts", err)
	}
}

// alertRules are the chart's alerting rules by name, with the overrides
// given as monitoring.alerts.
func alertRules(t *testing.T, overrides map[string]any) map[string]map[string]any {
	t.Helper()
	objs := renderChart(t, releaseNamespace, map[string]any{"monitoring": map[string]any{"enabled": true, "alerts": overrides}})
	groups, _, _ := unstructured.NestedSlice(find(t, objs, "PrometheusRule", "mcs-controller").Object, "spec", "groups")
	rules := map[string]map[string]any{}
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if r := r.(map[string]any); r["alert"] != nil {
				rules[r["alert"].(string)] = r
			}
		}
	}
	if len(rules) == 0 {
		t.Fatal("the chart's PrometheusRule has no alerts")
	}
	return rules
}

// clusterProfiles.installCRD installs deploy/cluster-inventory's
// ClusterProfile CRD, kept when the release goes; without it the chart
// installs none, as a cluster manager may own the one the hub has.
func TestHubChartClusterProfileCRD(t *testing.T) {
	const name = "clusterprofiles.multicluster.x-k8s.io"
	for _, u := range renderChart(t, releaseNamespace, map[string]any{"clusterProfiles": map[string]any{"enabled": true}}) {
		if objectKey(u) == "CustomResourceDefinition "+name {
			t.Fatalf("the chart installs %s without clusterProfiles.installCRD", name)
		}
	}
	got := find(t, renderChart(t, releaseNamespace, map[string]any{"clusterProfiles": map[string]any{"installCRD": true}}), "CustomResourceDefinition", name)
	want := find(t, render(t, "cluster-inventory"), "CustomResourceDefinition", name)
	if got.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
		t.Errorf("the chart's %s has annotations %v, want helm.sh/resource-policy: keep", name, got.GetAnnotations())
	}
	annotations := want.GetAnnotations()
	annotations["helm.sh/resource-policy"] = "keep"
	want.SetAnnotations(annotations)
	if diff := cmp.Diff(plainObject(t, want, true), plainObject(t, got, true)); diff != "" {
		t.Errorf("the chart's %s differs from deploy/cluster-inventory's (-deploy +chart):\n%s", name, diff)
	}
}
