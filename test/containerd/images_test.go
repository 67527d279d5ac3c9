//go:build lab

package containerd

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/miekg/dns"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// converge bounds the wait for a container to be ready and for the
// controller and DNS to follow a change: seconds in practice, more under
// -race on a busy machine.
const converge = 60 * time.Second

// TestImagesUnderContainerd builds both images as make images does, imports
// them into a containerd of its own and runs them as deploy/'s overlays do:
// member2's coredns-mcs with the overlay's Corefile, its in-cluster account
// reaching member2, and the hub's mcs-controller with the manifest's
// arguments, its in-cluster account reaching the hub and the members'
// kubeconfig mounted. Each runs as the manifest's securityContext says,
// which the test checks in the kernel: coredns-mcs serves port 53 as UID
// 65532 by its file capability alone. coredns-mcs answers a real DNS
// client, and a service exported in member1 reaches member2's DNS through
// the controller.
func TestImagesUnderContainerd(t *testing.T) {
	if skip != "" {
		t.Skipf("skipping the images under containerd: %s", skip)
	}
	l := labtest.Get(t)
	images := buildImages(t, l.Root())
	d := startContainerd(t)
	for _, img := range images {
		d.importImage(t, img)
	}
	ns := l.Namespace(t)
	own := ns + "-mcs" // the controller's: its leader Lease, on the hub
	l.NamedNamespace(t, own, labtest.Hub)
	l.InstallCRDs(t)

	coredns := loadWorkload(t, l.Root(), "overlays/member2", "coredns")
	server := runPod(t, d, images["coredns-mcs"], coredns, pod{cluster: labtest.Member2, namespace: "kube-system"})
	dnsPort := coredns.port(t, "dns").ContainerPort
	if start := unprivilegedPortStart(t, server); int(dnsPort) >= start {
		t.Errorf("port %d is unprivileged in the container's namespace (ip_unprivileged_port_start %d): serving it proves nothing", dnsPort, start)
	}
	kubernetes := l.ClusterIP(t, labtest.Member2, "default", "kubernetes", converge)
	server.expectA(t, dnsPort, "kubernetes.default.svc.cluster.local.", kubernetes)

	members := writeVolume(t, filepath.Join(d.dir, "members"), map[string]string{"kubeconfig": readFile(t, l.MembersKubeconfig(t))})
	controller := loadWorkload(t, l.Root(), "overlays/hub", "mcs-controller")
	runPod(t, d, images["mcs-controller"], controller, pod{
		cluster: labtest.Hub, namespace: own, reach: labtest.Members,
		flags: []string{"--mount", bind(members, "/etc/mcs-controller/members", true)},
		args:  []string{"--clusters-kubeconfig", "/etc/mcs-controller/members/kubeconfig", "--watch-namespaces", ns},
	})

	l.Workload(t, labtest.Member1, ns, "serve", 1, false)
	l.Apply(t, labtest.Member1, labtest.ServiceExport(ns, "serve"))
	vip := l.ClusterIP(t, labtest.Member2, ns, api.DerivedPrefix+"serve", converge)
	server.expectA(t, dnsPort, fmt.Sprintf("serve.%s.svc.clusterset.local.", ns), vip)
}

// image is an archive the builder wrote, as it printed it, and its config.
type image struct {
	archive, ref, digest string
	config               v1.Config
}

// buildImages runs the image builder as make images does, into a
// temporary directory, and returns its images by name: the test runs what
// make images makes of these sources, never stale archives. The builder
// runs as a command, not in this -race binary.
func buildImages(t *testing.T, root string) map[string]image {
	t.Helper()
	out := t.TempDir()
	cmd := exec.CommandContext(t.Context(), "go", "run", "./test/images", "-out", out, "-version", "runtime-test")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.Bytes())
	}
	images := map[string]image{}
	for line := range strings.Lines(string(b)) {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("the builder printed %q, want: archive reference digest", line)
		}
		img := image{archive: f[0], ref: f[1], digest: f[2]}
		readConfig(t, &img)
		images[strings.TrimSuffix(filepath.Base(img.archive), ".oci.tar")] = img
	}
	return images
}

// readConfig reads the image's config from its archive's manifest.json,
// which names the image of this machine's platform: the one of the index
// that containerd runs here.
func readConfig(t *testing.T, img *image) {
	t.Helper()
	i, err := tarball.ImageFromPath(img.archive, nil)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := i.ConfigFile()
	if err != nil {
		t.Fatalf("%s: %v", img.archive, err)
	}
	img.config = cf.Config
}

// expectA waits until the container's DNS server on port answers name with
// exactly one A record, ip.
func (c *container) expectA(t *testing.T, port int32, name, ip string) {
	t.Helper()
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		got, err := c.lookupA(ctx, port, name)
		if err != nil {
			return err
		}
		if !slices.Equal(got, []string{ip}) {
			return fmt.Errorf("%s: A %v, want %s", name, got, ip)
		}
		return nil
	})
}

// lookupA asks the container's DNS server on port for name's A records,
// over UDP from inside its namespace.
func (c *container) lookupA(ctx context.Context, port int32, name string) ([]string, error) {
	conn, err := c.net.Dial(ctx, "udp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	q := new(dns.Msg).SetQuestion(name, dns.TypeA)
	r, _, err := (&dns.Client{Timeout: time.Second}).ExchangeWithConnContext(ctx, q, &dns.Conn{Conn: conn})
	if err != nil {
		return nil, err
	}
	if r.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("%s: %s", name, dns.RcodeToString[r.Rcode])
	}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	return ips, nil
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
