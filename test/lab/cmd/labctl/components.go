package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// component is one process of a cluster: the binary of that name in binDir.
type component struct {
	name string
	// bin is the binary in binDir that runs it, when not name.
	bin   string
	ports []int
	args  func(l *lab, c cluster) []string
	env   []string // added to labctl's environment
	// ready tells when comp of c serves, checked through cl; it must hold
	// within timeout of the start.
	ready   func(c cluster, cl *clients) readiness
	timeout time.Duration
	// clients are the components that watch this one: labctl start
	// restarts them with it, since client-go's informers would wait out
	// their watch back-off, up to a minute, before they see it again.
	clients []*component
}

// readiness is what shows that a component serves, and its check.
type readiness struct {
	what  string
	check func(context.Context) error
}

// The Go heaps of the apiserver and controller manager are most of the
// lab's anonymous memory; a lower GOGC than the default 100 trades some CPU
// for keeping the 20 processes of the lab within 2 GiB. etcd keeps the
// default: its heap is small and it carries every write.
var (
	etcd = &component{
		name:  "etcd",
		ports: []int{etcdClientPort, etcdPeerPort},
		args:  etcdArgs,
		ready: func(c cluster, _ *clients) readiness {
			return readiness{"/health", etcdHealthy(c)}
		},
		timeout: etcdTimeout,
	}
	apiserver = &component{
		name:  "kube-apiserver",
		ports: []int{apiserverPort},
		args:  apiserverArgs,
		env:   []string{"GOGC=25"},
		ready: func(_ cluster, cl *clients) readiness {
			return readiness{"/readyz", cl.apiserverReady}
		},
		timeout: apiserverTimeout,
		// Not kwok: its pool of pod addresses lives in memory, and a new
		// kwok would give out addresses of running pods again.
		clients: []*component{controllerManager, scheduler, kubeProxy, podRunner},
	}
	controllerManager = &component{
		name:  "kube-controller-manager",
		ports: []int{kcmPort},
		args:  controllerManagerArgs,
		env:   []string{"GOGC=25"},
		ready: func(c cluster, _ *clients) readiness {
			return readiness{"/healthz", httpsHealthy(c.addr(kcmPort))}
		},
		timeout: setupTimeout,
	}
	scheduler = &component{
		name:  "kube-scheduler",
		ports: []int{schedulerPort},
		args:  schedulerArgs,
		env:   []string{"GOGC=50"},
		ready: func(c cluster, _ *clients) readiness {
			return readiness{"/healthz", httpsHealthy(c.addr(schedulerPort))}
		},
		timeout: setupTimeout,
	}
	kwok = &component{
		name:  "kwok",
		ports: []int{kwokServerPort},
		args:  kwokArgs,
		env:   []string{"GOGC=50"},
		ready: func(_ cluster, cl *clients) readiness {
			return readiness{"node " + nodeName + " Ready", cl.nodeReady}
		},
		timeout: setupTimeout,
	}
	// kubeProxy is labctl node-proxy (nodeproxy.go), in a lab with its
	// network only: it has no port on the host.
	kubeProxy = &component{
		name: "kube-proxy",
		bin:  "labctl",
		args: func(_ *lab, c cluster) []string { return []string{"node-proxy", c.name} },
		ready: func(c cluster, _ *clients) readiness {
			return readiness{"/healthz in the node's network", kubeProxyHealthy(c)}
		},
		timeout: setupTimeout,
	}
	// podRunner is labctl kubelet (kubelet.go), in a lab with its network
	// only: it runs the pods whose images have a stand-in and serves exec.
	podRunner = &component{
		name:  "kubelet",
		bin:   "labctl",
		ports: []int{kubeletPort},
		args:  func(_ *lab, c cluster) []string { return []string{"kubelet", c.name} },
		ready: func(c cluster, _ *clients) readiness {
			return readiness{"/healthz", httpsHealthy(c.addr(kubeletPort))}
		},
		timeout: setupTimeout,
	}
)

// components are in start order, those every lab has.
var components = []*component{etcd, apiserver, controllerManager, scheduler, kwok}

// components are this lab's: kube-proxy and the pods' kubelet too when it
// has its network.
func (l *lab) components() []*component {
	if l.hasNetwork() {
		return append(slices.Clip(components), kubeProxy, podRunner)
	}
	return components
}

func etcdArgs(l *lab, c cluster) []string {
	client := "http://" + c.addr(etcdClientPort)
	peer := "http://" + c.addr(etcdPeerPort)
	return []string{
		"--name=" + c.name,
		"--data-dir=" + filepath.Join(l.clusterDir(c), "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		// etcd listens for peers on localhost:2380 unless told otherwise,
		// which the four clusters would fight over.
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + c.name + "=" + peer,
		// A small backend quota and snapshot count keep etcd's memory
		// and disk to what a test lab needs.
		"--quota-backend-bytes=" + fmt.Sprint(512<<20),
		"--snapshot-count=10000",
		"--log-level=warn",
	}
}

func apiserverArgs(l *lab, c cluster) []string {
	dir := l.clusterDir(c)
	pki := l.pkiDir()
	return append([]string{
		"--etcd-servers=http://" + c.addr(etcdClientPort),
		"--bind-address=" + c.ip,
		"--advertise-address=" + c.ip,
		fmt.Sprintf("--secure-port=%d", apiserverPort),
		"--tls-cert-file=" + filepath.Join(dir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(dir, "apiserver.key"),
		"--token-auth-file=" + filepath.Join(pki, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(pki, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(pki, "sa.key"),
		"--service-cluster-ip-range=" + c.serviceCIDR,
		// Without kubelets nobody mounts service account tokens, and the
		// admission would refuse pods until the controller manager has
		// created the namespace's default ServiceAccount.
		"--disable-admission-plugins=ServiceAccount",
		// The reconciler refuses a loopback address in the kubernetes
		// Service's endpoints.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		// kwok's node has no resolvable host name; exec goes to the
		// lab's kubelet at the node's address (kubelet.go).
		"--kubelet-preferred-address-types=InternalIP",
		"--allow-privileged=true",
		"--profiling=false",
		"--runtime-config=" + strings.Join(disabledAPIs, ","),
	}, l.auditArgs(c)...)
}

// disabledAPIs are API groups nothing in the lab uses; each one left out
// saves the apiserver a few MB of schemas, storage and watch caches.
var disabledAPIs = []string{
	"autoscaling/v1=false",
	"autoscaling/v2=false",
	"batch/v1=false",
	"certificates.k8s.io/v1=false",
	"flowcontrol.apiserver.k8s.io/v1=false",
}

func controllerManagerArgs(l *lab, c cluster) []string {
	pki := l.pkiDir()
	return []string{
		"--kubeconfig=" + l.componentKubeconfig(c),
		"--bind-address=" + c.ip,
		fmt.Sprintf("--secure-port=%d", kcmPort),
		"--leader-elect=false",
		"--cluster-name=" + c.name,
		"--service-account-private-key-file=" + filepath.Join(pki, "sa.key"),
		"--root-ca-file=" + filepath.Join(pki, "ca.crt"),
		"--controllers=" + strings.Join(kcmControllers, ","),
		"--profiling=false",
	}
}

// kcmControllers turns off the controllers of disabledAPIs and those that
// need kubelets, volumes or certificates the lab does not have; each one
// left out saves informers. The lab creates its node with a pod CIDR, so
// node IPAM is off too.
var kcmControllers = []string{
	"*",
	"-bootstrap-signer-controller",
	"-token-cleaner-controller",
	"-certificatesigningrequest-signing-controller",
	"-certificatesigningrequest-approving-controller",
	"-certificatesigningrequest-cleaner-controller",
	"-podcertificaterequest-cleaner-controller",
	"-kube-apiserver-serving-clustertrustbundle-publisher-controller",
	"-persistentvolume-attach-detach-controller",
	"-persistentvolume-expander-controller",
	"-horizontal-pod-autoscaler-controller",
	"-job-controller",
	"-cronjob-controller",
	"-ttl-after-finished-controller",
	"-node-ipam-controller",
}

func schedulerArgs(l *lab, c cluster) []string {
	return []string{
		"--kubeconfig=" + l.componentKubeconfig(c),
		"--bind-address=" + c.ip,
		fmt.Sprintf("--secure-port=%d", schedulerPort),
		"--leader-elect=false",
		"--profiling=false",
	}
}

func kwokArgs(l *lab, c cluster) []string {
	return []string{
		"--kubeconfig=" + l.componentKubeconfig(c),
		"--config=" + filepath.Join(l.clusterDir(c), "kwok.yaml"),
		"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=fake",
		// Pods of a node get addresses from its spec.podCIDR; this is the
		// fallback for a node that has none.
		"--cidr=" + c.podCIDR,
		"--node-ip=" + c.ip,
		// The node's kubelet API, in its status, is the lab's kubelet
		// (kubelet.go); kwok's own server, which a node port turns on,
		// listens beside it unused.
		fmt.Sprintf("--node-port=%d", kubeletPort),
		"--server-address=" + c.addr(kwokServerPort),
		// kwok renews the node's Lease so the node lifecycle controller
		// keeps it Ready.
		"--node-lease-duration-seconds=40",
	}
}
