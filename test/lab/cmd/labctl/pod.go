package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/kubernetes/third_party/forked/golang/expansion"
	"k8s.io/utils/ptr"
)

// A pod that runs: its containers' commands are processes of the host,
// started by labctl pod-init (podinit.go) inside a network namespace that
// holds the pod's address, with the files a kubelet would give them. The
// namespace is joined to its cluster's node by a veth pair, as a CNI
// plugin joins a pod to its node, so that what the pod sends to a
// ClusterIP passes the node's kube-proxy:
//
//	pod netns mcs-lab-pod-<uid>          node netns mcs-lab-<cluster>
//	  eth0 <pod IP>/32  <---- veth ---->  lp<uid> (proxy ARP)
//	  default dev eth0                    <pod IP>/32 dev lp<uid>
//
// and the pods' network routes the address to that node, so pods of other
// clusters reach it too.

// standIns are the images whose pods the lab runs, each with the
// entrypoint its image gives a container that has no command. The host's
// tools stand in for the images': Debian's socat, dnsutils and
// netcat-openbsd, and bin/coredns-mcs of this repository for the
// coredns-mcs image of deploy/overlays. A pod of any other image is kwok's
// alone: Running and Ready, with nothing in it.
func standIns(repoRoot string) map[string][]string {
	return map[string][]string{
		"alpine/socat":            {"socat"},
		"nicolaka/netshoot":       nil,
		"coredns-mcs/coredns-mcs": {filepath.Join(repoRoot, "bin", "coredns-mcs")},
	}
}

// entrypoint is the stand-in entrypoint of image, and whether the lab runs
// it: image's repository, without registry, tag or digest, ends in a key
// of standIns.
func entrypoint(standIns map[string][]string, image string) ([]string, bool) {
	repo, _, _ := strings.Cut(image, "@")
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		repo = repo[:i]
	}
	for name, ep := range standIns {
		if repo == name || strings.HasSuffix(repo, "/"+name) {
			return ep, true
		}
	}
	return nil, false
}

// runnable tells whether the lab runs pod: every container's image has a
// stand-in.
func runnable(standIns map[string][]string, pod *corev1.Pod) bool {
	for _, c := range pod.Spec.Containers {
		if _, ok := entrypoint(standIns, c.Image); !ok {
			return false
		}
	}
	return len(pod.Spec.Containers) > 0
}

// podSpec is what pod-init needs to start a container or an exec in a pod,
// written to podSpecFile in the pod's directory.
type podSpec struct {
	Netns      string                 `json:"netns"`
	Mounts     []mount                `json:"mounts"`
	Containers map[string]containerIn `json:"containers"`
}

// mount is a file or directory of the pod's directory, seen by its
// processes at Target.
type mount struct {
	Source string `json:"source"`
	Target string `json:"target"`
}

type containerIn struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir,omitempty"`
}

const podSpecFile = "pod.json"

// runningPod is a pod the lab runs, until stop.
type runningPod struct {
	uid        types.UID // a pod of the same name made anew is another
	dir, netns string
	node, veth string // the node's namespace and its end of the pod's link
	cancel     context.CancelFunc
	done       sync.WaitGroup
	apiserver  net.Listener
}

// podNames are the names of a pod's network namespace and of its veth's
// node side (at most 15 bytes, the kernel's limit).
func podNames(pod *corev1.Pod) (netns, veth string) {
	uid := strings.ReplaceAll(string(pod.UID), "-", "")
	if len(uid) > 10 {
		uid = uid[:10]
	}
	return netnsPrefix + "pod-" + uid, "lp" + uid
}

// startPod makes pod's network and files and starts its containers, which
// run until stop; one that exits is started again after a back-off.
func (k *kubelet) startPod(pod *corev1.Pod) (*runningPod, error) {
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		return nil, fmt.Errorf("pod address %q: %w", pod.Status.PodIP, err)
	}
	netns, veth := podNames(pod)
	p := &runningPod{uid: pod.UID, dir: filepath.Join(k.lab.dir, "pods", pod.Namespace+"_"+pod.Name+"_"+string(pod.UID)),
		netns: netns, node: nodeNetns(k.cluster), veth: veth}
	// What a kubelet that was killed left of the pod goes first.
	killNetns(netns)
	if err := p.removeNetwork(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, err
	}
	// removeNetwork reads the address back.
	if err := os.WriteFile(filepath.Join(p.dir, "ip"), []byte(ip.String()), 0o644); err != nil {
		return nil, err
	}
	if err := k.podNetwork(ip, netns, veth); err != nil {
		return nil, errors.Join(err, p.removeNetwork())
	}
	spec, err := k.podFiles(pod, p.dir, netns)
	if err != nil {
		return nil, errors.Join(err, p.removeNetwork())
	}
	// The apiserver's address in the pod's network leads to it, as the
	// node's does for kube-proxy: the kubernetes Service of the lab has no
	// endpoints (its apiservers listen on loopback).
	if err := inNetns(netns, func() (err error) {
		p.apiserver, err = net.Listen("tcp", k.cluster.addr(apiserverPort))
		return err
	}); err != nil {
		return nil, errors.Join(err, p.removeNetwork())
	}
	go forward(p.apiserver, k.cluster.addr(apiserverPort))
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	for _, c := range pod.Spec.Containers {
		p.done.Go(func() { k.runContainer(ctx, p, c.Name, spec.Containers[c.Name]) })
	}
	return p, nil
}

// runContainer runs one container until ctx ends, starting it again after a
// back-off each time it exits, as a kubelet does under restartPolicy
// Always (the only policy of a Deployment's pods).
func (k *kubelet) runContainer(ctx context.Context, p *runningPod, name string, c containerIn) {
	logPath := filepath.Join(p.dir, name+".log")
	backoff := wait.NewExponentialBackoffManager(time.Second, 30*time.Second, 2*time.Minute, 2, 0, k.clock)
	wait.BackoffUntil(func() {
		log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			fmt.Fprintf(os.Stderr, "pod %s container %s: %v\n", p.dir, name, err)
			return
		}
		defer log.Close()
		cmd := k.podInit(ctx, p.dir, name, c.Argv)
		cmd.Stdout, cmd.Stderr = log, log
		err = cmd.Run()
		fmt.Fprintf(log, "labctl: container %s exited: %v\n", name, err)
	}, backoff, true, ctx.Done())
}

// podInit is the command that runs argv in container name of the pod in
// dir: labctl pod-init, in a mount namespace of its own, which it fills
// and then joins the pod's network and executes argv.
func (k *kubelet) podInit(ctx context.Context, dir, name string, argv []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(k.lab.binDir, "labctl"), append([]string{"pod-init", dir, name, "--"}, argv...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	cmd.WaitDelay = time.Second
	return cmd
}

// stop ends every process in the pod's network, its containers and what
// they started, and removes the network and the pod's files.
func (p *runningPod) stop() error {
	p.cancel()
	killNetns(p.netns)
	p.done.Wait()
	_ = p.apiserver.Close()
	return errors.Join(p.removeNetwork(), os.RemoveAll(p.dir))
}

// killNetns sends SIGKILL to every process in the named network namespace.
func killNetns(name string) {
	var want syscall.Stat_t
	if syscall.Stat(filepath.Join("/run/netns", name), &want) != nil {
		return
	}
	procs, _ := os.ReadDir("/proc")
	for _, d := range procs {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", d.Name(), "ns", "net"), &st) != nil || st.Ino != want.Ino || st.Dev != want.Dev {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(d.Name(), &pid); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// podNetwork makes the pod's namespace and veth and the routes to it in
// the node and in the pods' network.
func (k *kubelet) podNetwork(ip netip.Addr, netns, veth string) error {
	node := nodeNetns(k.cluster)
	_, nodeIP := link(k.cluster)
	for _, args := range [][]string{
		{"netns", "add", netns},
		{"-n", netns, "link", "set", "lo", "up"},
		{"-n", node, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns},
		{"-n", netns, "addr", "add", ip.String() + "/32", "dev", "eth0"},
		{"-n", netns, "link", "set", "eth0", "up"},
		{"-n", netns, "route", "add", "default", "dev", "eth0"},
		{"-n", node, "link", "set", veth, "up"},
		{"-n", node, "route", "add", ip.String() + "/32", "dev", veth},
		{"-n", podsNetns, "route", "replace", ip.String() + "/32", "via", nodeIP},
	} {
		if err := ipCmd(args...); err != nil {
			return err
		}
	}
	// The node answers the pod's neighbour requests for every address, so
	// that the pod's default route needs no gateway address.
	return inNetns(node, func() error {
		return os.WriteFile("/proc/sys/net/ipv4/conf/"+veth+"/proxy_arp", []byte("1"), 0o644)
	})
}

// removeNetwork deletes the pod's veth, its namespace and its route in the
// pods' network. The veth goes first: the kernel would remove it with the
// namespace, but later, and a pod started again meanwhile could not make
// its own.
func (p *runningPod) removeNetwork() error {
	var errs []error
	if b, err := os.ReadFile(filepath.Join(p.dir, "ip")); err == nil {
		_ = ipCmd("-n", podsNetns, "route", "del", strings.TrimSpace(string(b))+"/32")
	}
	_ = ipCmd("-n", p.node, "link", "del", p.veth) // absent unless the pod ran
	if _, err := os.Stat(filepath.Join("/run/netns", p.netns)); err == nil {
		errs = append(errs, ipCmd("netns", "delete", p.netns))
	}
	return errors.Join(errs...)
}

// ipCmd is ip, refusing to touch a namespace outside the lab's.
func ipCmd(args ...string) error {
	if len(args) > 1 && args[0] == "-n" && !strings.HasPrefix(args[1], netnsPrefix) {
		return fmt.Errorf("labctl: %s is not a namespace of the lab", args[1])
	}
	return ip(args...)
}

// podFiles writes what a kubelet gives a pod's containers: resolv.conf,
// the service account's token, configMap and emptyDir volumes, and each
// container's command and environment (podSpec), into dir.
func (k *kubelet) podFiles(pod *corev1.Pod, dir, netns string) (*podSpec, error) {
	spec := &podSpec{Netns: netns, Containers: map[string]containerIn{}}
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(resolv, []byte(k.resolvConf(pod)), 0o644); err != nil {
		return nil, err
	}
	spec.Mounts = append(spec.Mounts, mount{Source: resolv, Target: "/etc/resolv.conf"})
	volumes, err := k.podVolumes(pod, dir)
	if err != nil {
		return nil, err
	}
	for _, c := range pod.Spec.Containers {
		ep, _ := entrypoint(k.standIns, c.Image)
		vars := k.containerEnv(pod, c)
		for _, vm := range c.VolumeMounts {
			src, ok := volumes[vm.Name]
			if !ok {
				return nil, fmt.Errorf("container %s mounts volume %s, which the lab cannot make", c.Name, vm.Name)
			}
			spec.Mounts = append(spec.Mounts, mount{Source: filepath.Join(src, vm.SubPath), Target: vm.MountPath})
		}
		spec.Containers[c.Name] = containerIn{Argv: containerArgv(ep, c, vars), Env: environ(vars), Dir: c.WorkingDir}
	}
	if token, ok := volumes[tokenVolume]; ok {
		spec.Mounts = append(spec.Mounts, mount{Source: token, Target: tokenMountPath})
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return spec, os.WriteFile(filepath.Join(dir, podSpecFile), b, 0o644)
}

// resolvConf is /etc/resolv.conf as a kubelet writes it: for ClusterFirst
// (the default), the cluster DNS Service's address, which kubeadm makes
// the tenth of the Service range, and the search path of the pod's
// namespace. For Default, the "node's" resolver, which the lab has not:
// the address of the pods' network on the node's link, where nothing
// answers, so that CoreDNS's forward fails fast instead of looping back.
func (k *kubelet) resolvConf(pod *corev1.Pod) string {
	if pod.Spec.DNSPolicy == corev1.DNSDefault {
		podsIP, _ := link(k.cluster)
		return "nameserver " + podsIP + "\n"
	}
	return fmt.Sprintf("search %[1]s.svc.cluster.local svc.cluster.local cluster.local\nnameserver %[2]s\noptions ndots:5\n",
		pod.Namespace, k.cluster.dnsServiceIP())
}

const (
	tokenVolume    = "kube-api-access"
	tokenMountPath = "/var/run/secrets/kubernetes.io/serviceaccount"
)

// podVolumes writes each volume the lab can make into dir/volumes and
// returns their paths by name: configMap and emptyDir volumes, and the
// service account's token, requested for the pod as a kubelet's projected
// volume does (one day's token; the lab lives shorter).
func (k *kubelet) podVolumes(pod *corev1.Pod, dir string) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	paths := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		path := filepath.Join(dir, "volumes", v.Name)
		if err := os.MkdirAll(path, 0o755); err != nil {
			return nil, err
		}
		switch {
		case v.ConfigMap != nil:
			cm, err := k.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			if err := writeConfigMap(path, cm, v.ConfigMap.Items); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		case v.EmptyDir != nil:
		default:
			continue
		}
		paths[v.Name] = path
	}
	// The lab's apiservers run without the ServiceAccount admission, which
	// would name an account and add the token's volume to every pod: only
	// a pod that names its account gets a token, as it would there.
	if pod.Spec.ServiceAccountName != "" && ptr.Deref(pod.Spec.AutomountServiceAccountToken, true) {
		path := filepath.Join(dir, "volumes", tokenVolume)
		if err := k.writeToken(ctx, path, pod); err != nil {
			return nil, err
		}
		paths[tokenVolume] = path
	}
	return paths, nil
}

func writeConfigMap(dir string, cm *corev1.ConfigMap, items []corev1.KeyToPath) error {
	if len(items) == 0 {
		for key := range cm.Data {
			items = append(items, corev1.KeyToPath{Key: key, Path: key})
		}
	}
	for _, it := range items {
		data, ok := cm.Data[it.Key]
		if !ok {
			return fmt.Errorf("configmap %s has no key %s", cm.Name, it.Key)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Clean("/"+it.Path)), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeToken writes the token, ca.crt and namespace files of the pod's
// service account into dir.
func (k *kubelet) writeToken(ctx context.Context, dir string, pod *corev1.Pod) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sa := pod.Spec.ServiceAccountName
	tr, err := requestToken(ctx, k.client, pod, sa)
	if err != nil {
		return fmt.Errorf("token of service account %s/%s: %w", pod.Namespace, sa, err)
	}
	ca, err := os.ReadFile(filepath.Join(k.lab.pkiDir(), "ca.crt"))
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"token": []byte(tr), "ca.crt": ca, "namespace": []byte(pod.Namespace)} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func requestToken(ctx context.Context, client kubernetes.Interface, pod *corev1.Pod, sa string) (string, error) {
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To(int64(24 * 60 * 60)),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	tr, err := client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// containerEnv is c's environment as a kubelet gives it: the kubernetes
// Service's variables (pointing at the apiserver's address, which the pod
// reaches; see startPod), then c's env with its fieldRefs resolved and
// $(VAR) references expanded. A ConfigMap or Secret reference is left
// empty: no pod the lab runs uses one.
func (k *kubelet) containerEnv(pod *corev1.Pod, c corev1.Container) map[string]string {
	vars := map[string]string{
		"KUBERNETES_SERVICE_HOST": k.cluster.ip,
		"KUBERNETES_SERVICE_PORT": fmt.Sprint(apiserverPort),
		"HOSTNAME":                pod.Name,
		"PATH":                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}
	mapping := expansion.MappingFuncFor(vars)
	for _, e := range c.Env {
		v := expansion.Expand(e.Value, mapping)
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			v = fieldValue(pod, e.ValueFrom.FieldRef.FieldPath)
		}
		vars[e.Name] = v
	}
	return vars
}

// environ is vars as execve takes them, NAME=value, sorted.
func environ(vars map[string]string) []string {
	env := make([]string, 0, len(vars))
	for name, v := range vars {
		env = append(env, name+"="+v)
	}
	slices.Sort(env)
	return env
}

// fieldValue is what the downward API gives for path.
func fieldValue(pod *corev1.Pod, path string) string {
	switch path {
	case "metadata.name":
		return pod.Name
	case "metadata.namespace":
		return pod.Namespace
	case "metadata.uid":
		return string(pod.UID)
	case "spec.nodeName":
		return pod.Spec.NodeName
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName
	case "status.podIP":
		return pod.Status.PodIP
	case "status.hostIP":
		return pod.Status.HostIP
	case "status.podIPs":
		var ips []string
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ",")
	}
	return ""
}

// containerArgv is c's command line: its command or else the image's
// entrypoint, then its args, with $(VAR) references expanded.
func containerArgv(entrypoint []string, c corev1.Container, vars map[string]string) []string {
	mapping := expansion.MappingFuncFor(vars)
	argv := entrypoint
	if len(c.Command) > 0 {
		argv = c.Command
	}
	var out []string
	for _, a := range append(append([]string{}, argv...), c.Args...) {
		out = append(out, expansion.Expand(a, mapping))
	}
	return out
}
