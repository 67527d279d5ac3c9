//go:build lab

package containerd

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// workload is the one container of a Deployment of deploy/, rendered as
// kustomize build renders its overlay, with the overlay's ConfigMaps.
type workload struct {
	name       string
	pod        corev1.PodSpec
	container  corev1.Container
	configMaps map[string]corev1.ConfigMap
}

// loadWorkload renders overlay, a directory of deploy/, and returns its
// Deployment name.
func loadWorkload(t *testing.T, root, overlay, name string) *workload {
	t.Helper()
	dir := filepath.Join(root, "deploy", overlay)
	rm, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	w := &workload{name: name, configMaps: map[string]corev1.ConfigMap{}}
	var found bool
	for _, r := range rm.Resources() {
		switch r.GetKind() {
		case "Deployment":
			if r.GetName() != name {
				continue
			}
			var d appsv1.Deployment
			fromResource(t, r.Map, &d)
			if n := len(d.Spec.Template.Spec.Containers); n != 1 {
				t.Fatalf("%s: Deployment %s has %d containers, the test runs one", overlay, name, n)
			}
			w.pod, w.container, found = d.Spec.Template.Spec, d.Spec.Template.Spec.Containers[0], true
		case "ConfigMap":
			var cm corev1.ConfigMap
			fromResource(t, r.Map, &cm)
			w.configMaps[cm.Name] = cm
		}
	}
	if !found {
		t.Fatalf("%s renders no Deployment %s", overlay, name)
	}
	return w
}

// fromResource converts a rendered object (its Map method) into a typed one.
func fromResource(t *testing.T, asMap func() (map[string]any, error), into any) {
	t.Helper()
	m, err := asMap()
	if err == nil {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(m, into)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// expected is what the container's process must show once it runs as its
// manifest says.
type expected struct {
	uid, gid   int
	caps       []string // CAP_ names of its bounding, permitted and effective sets
	noNewPrivs bool
	seccomp    bool // the runtime's default profile filters its system calls
	readOnly   bool // its root filesystem
}

// supportedSecurity are the securityContext fields that security turns into
// ctr flags: a manifest that sets another fails the test rather than run
// without it.
var supportedSecurity = []string{
	"runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile", // pod or container
	"capabilities", "allowPrivilegeEscalation", "readOnlyRootFilesystem", // container
}

// security turns the pod's and the container's securityContext into ctr run
// flags as the kubelet and containerd's CRI plugin apply them, starting from
// the default capabilities they share with ctr.
func (w *workload) security(t *testing.T, img image, defaultCaps []string) ([]string, expected) {
	t.Helper()
	pod, c := orZero(w.pod.SecurityContext), orZero(w.container.SecurityContext)
	checkSupported(t, w.name, pod, c)
	var expect expected
	expect.uid, expect.gid = w.user(t, img, pod, c)
	flags, caps := capabilities(c.Capabilities, defaultCaps)
	expect.caps = caps
	// Unset, allowPrivilegeEscalation is true; ctr's default is false.
	if expect.noNewPrivs = c.AllowPrivilegeEscalation != nil && !*c.AllowPrivilegeEscalation; !expect.noNewPrivs {
		flags = append(flags, "--allow-new-privs")
	}
	if expect.readOnly = c.ReadOnlyRootFilesystem != nil && *c.ReadOnlyRootFilesystem; expect.readOnly {
		flags = append(flags, "--read-only")
	}
	// Unset, the kubelet runs a container Unconfined (unless told
	// --seccomp-default); RuntimeDefault is containerd's default profile,
	// which ctr --seccomp applies.
	profile := firstSet(c.SeccompProfile, pod.SeccompProfile)
	switch {
	case profile == nil || profile.Type == corev1.SeccompProfileTypeUnconfined:
	case profile.Type == corev1.SeccompProfileTypeRuntimeDefault:
		flags, expect.seccomp = append(flags, "--seccomp"), true
	default:
		t.Fatalf("%s: seccompProfile %s: the test runs RuntimeDefault and Unconfined only", w.name, profile.Type)
	}
	return flags, expect
}

// user is the UID and GID the container runs as: the image's, since ctr
// 1.6 has no flag for another, so the manifest must name the same ones if
// it names any.
func (w *workload) user(t *testing.T, img image, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) (uid, gid int) {
	t.Helper()
	u, g, _ := strings.Cut(img.config.User, ":")
	uid, errU := strconv.Atoi(u)
	gid, errG := strconv.Atoi(g)
	if errU != nil || errG != nil {
		t.Fatalf("%s: user %q is not UID:GID", img.ref, img.config.User)
	}
	for _, id := range []struct {
		field string
		set   *int64
		image int
	}{
		{"runAsUser", firstSet(c.RunAsUser, pod.RunAsUser), uid},
		{"runAsGroup", firstSet(c.RunAsGroup, pod.RunAsGroup), gid},
	} {
		if id.set != nil && int(*id.set) != id.image {
			t.Fatalf("%s: %s %d, but the image runs as %s: ctr runs the image's user only", w.name, id.field, *id.set, img.config.User)
		}
	}
	if nonRoot := firstSet(c.RunAsNonRoot, pod.RunAsNonRoot); nonRoot != nil && *nonRoot && uid == 0 {
		t.Fatalf("%s: runAsNonRoot, but the image runs as root: the kubelet would refuse it", w.name)
	}
	return uid, gid
}

// capabilities is the container's capability set, as the CRI plugin makes
// it (the defaults less drop, or none when drop has ALL; then add), and the
// ctr flags that give it. ctr adds before it drops, so the flags drop only
// what is not in the set.
func capabilities(c *corev1.Capabilities, defaults []string) (flags, caps []string) {
	c = orZero(c)
	if !slices.Contains(c.Drop, "ALL") {
		for _, d := range defaults {
			if !slices.Contains(c.Drop, corev1.Capability(strings.TrimPrefix(d, "CAP_"))) {
				caps = append(caps, d)
			}
		}
	}
	for _, a := range c.Add {
		if name := "CAP_" + string(a); !slices.Contains(caps, name) {
			caps = append(caps, name)
		}
	}
	slices.Sort(caps)
	for _, d := range defaults {
		if !slices.Contains(caps, d) {
			flags = append(flags, "--cap-drop", d)
		}
	}
	for _, name := range caps {
		if !slices.Contains(defaults, name) {
			flags = append(flags, "--cap-add", name)
		}
	}
	return flags, caps
}

// checkSupported fails the test when a securityContext sets a field that
// is not in supportedSecurity.
func checkSupported(t *testing.T, name string, contexts ...any) {
	t.Helper()
	for _, sc := range contexts {
		b, err := json.Marshal(sc)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]any
		if err := json.Unmarshal(b, &fields); err != nil {
			t.Fatal(err)
		}
		for field := range fields {
			if !slices.Contains(supportedSecurity, field) {
				t.Fatalf("%s: securityContext sets %s, which this test does not turn into a ctr flag: teach it", name, field)
			}
		}
	}
}

// mounts bind-mounts each volumeMount read-only or not, as its manifest
// says; a ConfigMap volume is the overlay's rendered ConfigMap, its items
// written into a directory under dir.
func (w *workload) mounts(t *testing.T, dir string) []string {
	t.Helper()
	var flags []string
	for _, m := range w.container.VolumeMounts {
		i := slices.IndexFunc(w.pod.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || w.pod.Volumes[i].ConfigMap == nil {
			t.Fatalf("%s: volumeMount %s: the test mounts ConfigMap volumes only", w.name, m.Name)
		}
		src := w.configMap(t, w.pod.Volumes[i].ConfigMap, filepath.Join(dir, m.Name))
		flags = append(flags, "--mount", bind(src, m.MountPath, m.ReadOnly))
	}
	return flags
}

// configMap writes the files of a ConfigMap volume into dir.
func (w *workload) configMap(t *testing.T, v *corev1.ConfigMapVolumeSource, dir string) string {
	t.Helper()
	cm, ok := w.configMaps[v.Name]
	if !ok {
		t.Fatalf("%s: the overlay renders no ConfigMap %s", w.name, v.Name)
	}
	items := v.Items
	if len(items) == 0 {
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			items = append(items, corev1.KeyToPath{Key: k, Path: k})
		}
	}
	files := map[string]string{}
	for _, it := range items {
		files[it.Path] = cm.Data[it.Key]
	}
	return writeVolume(t, dir, files)
}

// writeVolume writes files into dir, readable by the container's user as
// the kubelet's volumes are (files 0644), and returns dir.
func writeVolume(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func bind(src, dst string, readOnly bool) string {
	mode := "rw"
	if readOnly {
		mode = "ro"
	}
	return fmt.Sprintf("type=bind,src=%s,dst=%s,options=rbind:%s", src, dst, mode)
}

// env is the container's environment from its manifest; the downward API's
// metadata.namespace is namespace, the pod's.
func (w *workload) env(t *testing.T, namespace string) []string {
	t.Helper()
	var flags []string
	for _, e := range w.container.Env {
		value := e.Value
		if e.ValueFrom != nil {
			if f := e.ValueFrom.FieldRef; f == nil || f.FieldPath != "metadata.namespace" {
				t.Fatalf("%s: env %s: the test sets values and metadata.namespace only", w.name, e.Name)
			}
			value = namespace
		}
		flags = append(flags, "--env", e.Name+"="+value)
	}
	return flags
}

// memory is the container's memory limit, if it has one.
func (w *workload) memory() []string {
	limit, ok := w.container.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		return nil
	}
	return []string{"--memory-limit", strconv.FormatInt(limit.Value(), 10)}
}

// argv is the process's command line as the kubelet makes it: the
// manifest's command, else the image's entrypoint (with the image's cmd
// when the manifest has no args), then the manifest's args and extra.
func (w *workload) argv(img image, extra ...string) []string {
	c := w.container
	argv := slices.Clone(c.Command)
	if len(argv) == 0 {
		argv = slices.Clone(img.config.Entrypoint)
		if len(c.Args) == 0 {
			argv = append(argv, img.config.Cmd...)
		}
	}
	return append(append(argv, c.Args...), extra...)
}

// probeURL is the URL of an httpGet probe of the manifest, from inside the
// container's network namespace.
func (w *workload) probeURL(t *testing.T, kind string, p *corev1.Probe) string {
	t.Helper()
	if p == nil || p.HTTPGet == nil || (p.HTTPGet.Scheme != "" && p.HTTPGet.Scheme != corev1.URISchemeHTTP) {
		t.Fatalf("%s: the test runs HTTP %s probes only", w.name, kind)
	}
	port := p.HTTPGet.Port.IntValue()
	if p.HTTPGet.Port.Type == intstr.String {
		port = int(w.port(t, p.HTTPGet.Port.StrVal).ContainerPort)
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", port, p.HTTPGet.Path)
}

// port is the container's port of that name.
func (w *workload) port(t *testing.T, name string) corev1.ContainerPort {
	t.Helper()
	i := slices.IndexFunc(w.container.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
	if i < 0 {
		t.Fatalf("%s: no container port %s", w.name, name)
	}
	return w.container.Ports[i]
}

// firstSet is the container's setting, else the pod's: the container's
// wins.
func firstSet[T any](container, pod *T) *T {
	if container != nil {
		return container
	}
	return pod
}

// orZero is p, or a pointer to T's zero value when p is nil.
func orZero[T any](p *T) *T {
	if p == nil {
		return new(T)
	}
	return p
}
