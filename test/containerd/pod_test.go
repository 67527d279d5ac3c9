//go:build lab

package containerd

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// pod says where the test runs a workload: the cluster whose API its
// in-cluster account reaches, the namespace it runs in, more clusters it
// reaches, and ctr flags and arguments the manifest does not have.
type pod struct {
	cluster, namespace string
	reach              []string
	flags, args        []string
}

// runPod runs the workload's image under containerd as a kubelet of
// p.cluster would, with its manifest's securityContext, memory limit,
// mounts, environment and arguments; bridges the API servers of p.cluster
// and p.reach into its network namespace; waits until it is ready; and
// checks its process.
func runPod(t *testing.T, d *daemon, img image, w *workload, p pod) *container {
	t.Helper()
	dir := filepath.Join(d.dir, p.namespace+"-"+w.name)
	security, expect := w.security(t, img, d.defaultCaps(t))
	flags := slices.Concat(security, w.memory(), w.mounts(t, filepath.Join(dir, "volumes")), w.env(t, p.namespace),
		kubelet(t, p.cluster, p.namespace, dir), p.flags)
	argv := w.argv(img, p.args...)
	c := d.run(t, p.namespace+"-"+w.name, img.ref, flags, argv)
	for _, cluster := range append([]string{p.cluster}, p.reach...) {
		c.bridge(t, apiHost(t, cluster))
	}
	c.waitReady(t, w, expect.uid)
	checkProcess(t, c, expect, argv[0])
	return c
}

// serviceAccountDir is where the kubelet mounts a pod's service account,
// and where client-go's in-cluster config reads it.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// kubelet is what a kubelet gives every container: the service account's
// token, CA and namespace (the lab's account of cluster stands in for the
// ServiceAccount), KUBERNETES_SERVICE_HOST and _PORT naming the API
// server, and a resolv.conf.
func kubelet(t *testing.T, cluster, namespace, dir string) []string {
	t.Helper()
	cfg := labtest.Get(t).Config(t, cluster)
	account := writeVolume(t, filepath.Join(dir, "serviceaccount"), map[string]string{
		"token": cfg.BearerToken, "ca.crt": string(cfg.CAData), "namespace": namespace,
	})
	// Not the node's resolv.conf, which may name a resolver on loopback
	// (systemd-resolved's 127.0.0.53): in the container's namespace that
	// would be coredns-mcs itself, and its loop plugin would stop it. The
	// container has no route out; names the test asks are answered inside.
	resolv := writeVolume(t, filepath.Join(dir, "resolv"), map[string]string{"resolv.conf": "nameserver 192.0.2.53\n"})
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return []string{
		"--mount", bind(account, serviceAccountDir, true),
		"--mount", bind(filepath.Join(resolv, "resolv.conf"), "/etc/resolv.conf", true),
		"--env", "KUBERNETES_SERVICE_HOST=" + u.Hostname(), "--env", "KUBERNETES_SERVICE_PORT=" + u.Port(),
	}
}

// apiHost is the host:port of cluster's API server.
func apiHost(t *testing.T, cluster string) string {
	t.Helper()
	u, err := url.Parse(labtest.Get(t).Config(t, cluster).Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// waitReady waits until the manifest's readiness and liveness probes
// answer 200 from inside the container's namespace and each of its ports is
// bound by uid (CoreDNS's ready plugin may say 200 before the server
// listens); it fails at once when the container exits.
func (c *container) waitReady(t *testing.T, w *workload, uid int) {
	t.Helper()
	urls := []string{w.probeURL(t, "readiness", w.container.ReadinessProbe), w.probeURL(t, "liveness", w.container.LivenessProbe)}
	transport := &http.Transport{DialContext: c.net.Dial}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 2 * time.Second}
	ready := func(ctx context.Context) error {
		for _, u := range urls {
			if err := get(ctx, client, u); err != nil {
				return err
			}
		}
		for _, p := range w.container.Ports {
			if !bound(t, c.pid, p.Protocol, p.ContainerPort, uid) {
				return fmt.Errorf("nothing of UID %d serves port %d/%s (%s)", uid, p.ContainerPort, p.Protocol, p.Name)
			}
		}
		return nil
	}
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, converge, true, func(ctx context.Context) (bool, error) {
		if err := c.alive(); err != nil {
			return false, err
		}
		last = ready(ctx)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("%s is not ready within %s: %v (last: %v)", c.id, converge, err, last)
	}
}

func get(ctx context.Context, client *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	return nil
}
