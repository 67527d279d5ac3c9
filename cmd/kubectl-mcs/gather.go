package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	inventoryclient "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"
	"sigs.k8s.io/yaml"

	"github.com/coredns-mcs/coredns-mcs/api"
	mcsclientset "github.com/coredns-mcs/coredns-mcs/api/client/clientset/versioned"
)

// gather writes a support bundle: what a maintainer asks for first, read
// from the hub and every member through the operator's contexts, into one
// tarball with a manifest of what it holds and what could not be read.
// Credentials never go in: member Secrets are summarised (cluster, server,
// expiry), never copied, and every file is scrubbed of anything shaped
// like a token, a key or a certificate besides (a log line, an annotation
// of kubectl's that holds a whole object).

type gatherOptions struct {
	hubOptions
	memberSources
	file  string
	since time.Duration
}

func newGather(flags *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := &gatherOptions{hubOptions: hubOptions{flags: flags, streams: streams}}
	cmd := &cobra.Command{
		Use:   "gather [--hub-context HUB] [--members A,B] [-f FILE]",
		Short: "Write a support bundle of the hub and every member, without credentials",
		Long: `gather writes one tarball (-f, default mcs-gather-<time>.tar.gz) of what a report needs:
  - the hub: mcs-controller's Deployments (their flags), the logs and /metrics of every replica
    (not one pod of the Deployment), its Leases and Events, every MultiClusterService, and the
    member Secrets summarised: cluster, server, when their credentials expire; never a token,
    key or certificate;
  - each member (the hub's member Secrets and ClusterProfiles, or --members; reached with the context of its name,
    or --member-context CLUSTER=CONTEXT): the controller's objects (ServiceImports, derived-<svc>
    Services, imported EndpointSlices), the ServiceExports and their conditions, the Leases of
    mcs-system, and CoreDNS: its Deployment (image), Corefile, and every pod's logs and /metrics;
  - manifest.json: every file with its size, and everything that could not be read, with why.
Every file is scrubbed of anything shaped like a token, a key or a certificate.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := noNamespace(cmd); err != nil {
				return err
			}
			return o.run(cmd.Context())
		},
	}
	o.addFlags(cmd)
	o.addMemberContexts(cmd)
	o.addMemberFlags(cmd)
	cmd.Flags().StringVarP(&o.file, "file", "f", "", "the tarball to write (default mcs-gather-<time>.tar.gz in the current directory)")
	cmd.Flags().DurationVar(&o.since, "since", 24*time.Hour, "logs of at most this long ago; 0: all the pods have")
	return cmd
}

func (o *gatherOptions) run(ctx context.Context) error {
	cfg, err := o.hubConfig()
	if err != nil {
		return err
	}
	hub, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hubMCS, err := mcsclientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if o.file == "" {
		o.file = "mcs-gather-" + time.Now().UTC().Format("20060102-150405") + ".tar.gz"
	}
	f, err := os.Create(o.file)
	if err != nil {
		return err
	}
	profiles, err := inventoryclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	g := &gatherer{hub: hub, hubMCS: hubMCS, profiles: profiles, namespace: o.controllerNamespace, sources: o.memberSources, since: o.since, connect: o.memberClients}
	m, err := g.write(ctx, f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.streams.Out, "wrote %s: %d files, %d things not read (manifest.json says which)\n", o.file, len(m.Files), len(m.Unreadable))
	return err
}

// memberClients reaches member cluster through its context.
func (o *gatherOptions) memberClients(cluster string) (kubernetes.Interface, mcsclient.Interface, error) {
	cfg, err := o.memberConfig(cluster)
	if err != nil {
		return nil, nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	mcs, err := mcsclient.NewForConfig(cfg)
	return kube, mcs, err
}

// gatherer reads the fleet into a bundle.
type gatherer struct {
	hub       kubernetes.Interface
	hubMCS    mcsclientset.Interface
	profiles  inventoryclient.Interface
	namespace string // the controller's, on the hub
	sources   memberSources
	since     time.Duration
	connect   func(cluster string) (kubernetes.Interface, mcsclient.Interface, error)
}

// Manifest is what a bundle holds, and what it could not read.
type Manifest struct {
	Created    string       `json:"created"`
	Files      []BundleFile `json:"files"`
	Unreadable []Unreadable `json:"unreadable,omitempty"`
}

// BundleFile is one file of the bundle.
type BundleFile struct {
	Path  string `json:"path"`
	Bytes int    `json:"bytes"`
}

// Unreadable is what could not be read, and why.
type Unreadable struct {
	What  string `json:"what"`
	Error string `json:"error"`
}

// bundle is the tarball being written.
type bundle struct {
	tw       *tar.Writer
	now      time.Time
	manifest Manifest
	err      error // the first write that failed: the bundle is broken
}

// write reads everything into a gzip'd tarball on w, manifest.json last.
func (g *gatherer) write(ctx context.Context, w io.Writer) (*Manifest, error) {
	gz := gzip.NewWriter(w)
	b := &bundle{tw: tar.NewWriter(gz), now: time.Now().UTC()}
	b.manifest.Created = b.now.Format(time.RFC3339)
	g.gatherHub(ctx, b)
	for _, m := range g.memberNames(ctx, b) {
		g.gatherMember(ctx, b, m)
	}
	manifest, err := json.MarshalIndent(b.manifest, "", "  ")
	if err != nil {
		return nil, err
	}
	b.add("manifest.json", manifest)
	for _, c := range []io.Closer{b.tw, gz} {
		if err := c.Close(); err != nil && b.err == nil {
			b.err = err
		}
	}
	return &b.manifest, b.err
}

func (g *gatherer) gatherHub(ctx context.Context, b *bundle) {
	ns := g.namespace
	b.list("hub/controller/deployments.yaml", "the hub: mcs-controller's Deployments", func() (any, error) {
		return g.hub.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{LabelSelector: controllerSelector})
	})
	b.pods(ctx, g.hub, "hub/controller", ns, controllerSelector, "8080", g.since)
	b.list("hub/controller/leases.yaml", "the hub: Leases of "+ns, func() (any, error) {
		return g.hub.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	})
	b.list("hub/controller/events.yaml", "the hub: Events of "+ns, func() (any, error) {
		return g.hub.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	})
	b.list("hub/multiclusterservices.yaml", "the hub: MultiClusterServices", func() (any, error) {
		return g.hubMCS.McsV1alpha1().MultiClusterServices("").List(ctx, metav1.ListOptions{})
	})
	b.list("hub/member-secrets.yaml", "the hub: member Secrets of "+ns, func() (any, error) {
		secrets, err := g.hub.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelCluster})
		if err != nil {
			return nil, err
		}
		return summarise(secrets.Items), nil
	})
	if pns := g.sources.profileNamespace; pns != "" {
		b.list("hub/clusterprofiles.yaml", "the hub: ClusterProfiles of "+pns, func() (any, error) {
			return g.profiles.ApisV1alpha1().ClusterProfiles(pns).List(ctx, metav1.ListOptions{})
		})
	}
}

// controllerSelector selects mcs-controller's pods and Deployments, of the
// overlays and of the chart.
const controllerSelector = "app.kubernetes.io/name=mcs-controller"

// memberNames are --members, else the members the hub registers.
func (g *gatherer) memberNames(ctx context.Context, b *bundle) []string {
	if len(g.sources.members) > 0 {
		return g.sources.members
	}
	r, err := g.sources.registered(ctx, g.hub, g.profiles, g.namespace)
	if err != nil {
		b.failed("the hub: the registrations that name the members", err)
		return nil
	}
	return r.names
}

func (g *gatherer) gatherMember(ctx context.Context, b *bundle, cluster string) {
	kube, mcs, err := g.connect(cluster)
	if err != nil {
		b.failed("member "+cluster, err)
		return
	}
	dir := "members/" + cluster + "/"
	owned := metav1.ListOptions{LabelSelector: api.LabelManagedBy + "=" + api.ManagedBy}
	b.list(dir+"serviceimports.yaml", cluster+": ServiceImports", func() (any, error) {
		return mcs.MulticlusterV1beta1().ServiceImports("").List(ctx, metav1.ListOptions{})
	})
	b.list(dir+"serviceexports.yaml", cluster+": ServiceExports", func() (any, error) {
		return mcs.MulticlusterV1beta1().ServiceExports("").List(ctx, metav1.ListOptions{})
	})
	b.list(dir+"derived-services.yaml", cluster+": the controller's Services", func() (any, error) {
		return kube.CoreV1().Services("").List(ctx, owned)
	})
	b.list(dir+"imported-endpointslices.yaml", cluster+": the controller's EndpointSlices", func() (any, error) {
		return kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelManagedBy + "=" + api.ManagedBy})
	})
	b.list(dir+"leases.yaml", cluster+": Leases of "+api.LeaseNamespace, func() (any, error) {
		return kube.CoordinationV1().Leases(api.LeaseNamespace).List(ctx, metav1.ListOptions{})
	})
	b.list(dir+"coredns/deployment.yaml", cluster+": Deployment kube-system/coredns", func() (any, error) {
		return kube.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	})
	b.list(dir+"coredns/configmap.yaml", cluster+": ConfigMap kube-system/coredns (the Corefile)", func() (any, error) {
		return kube.CoreV1().ConfigMaps(metav1.NamespaceSystem).Get(ctx, "coredns", metav1.GetOptions{})
	})
	b.pods(ctx, kube, dir+"coredns", metav1.NamespaceSystem, "k8s-app=kube-dns", "9153", g.since)
}

// pods adds the logs and /metrics (through the API server's pods/proxy, on
// port) of every pod selector selects in namespace, under dir.
func (b *bundle) pods(ctx context.Context, kube kubernetes.Interface, dir, namespace, selector, port string, since time.Duration) {
	pods, err := kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		b.failed(dir+": pods "+selector+" in "+namespace, err)
		return
	}
	for _, p := range pods.Items {
		for _, c := range p.Spec.Containers {
			what := fmt.Sprintf("%s: logs of %s/%s, container %s", dir, namespace, p.Name, c.Name)
			opts := &corev1.PodLogOptions{Container: c.Name}
			if since >= time.Second { // the API server refuses a sinceSeconds under 1
				opts.SinceSeconds = ptr.To(int64(since / time.Second))
			}
			data, err := kube.CoreV1().Pods(namespace).GetLogs(p.Name, opts).DoRaw(ctx)
			b.addOr(fmt.Sprintf("%s/logs/%s.%s.log", dir, p.Name, c.Name), what, data, err)
		}
		data, err := kube.CoreV1().Pods(namespace).ProxyGet("http", p.Name, port, "/metrics", nil).DoRaw(ctx)
		b.addOr(dir+"/metrics/"+p.Name+".txt", fmt.Sprintf("%s: /metrics of %s/%s on :%s", dir, namespace, p.Name, port), data, err)
	}
}

// list adds what read returns, as YAML without what no report needs and
// a credential may hide in (cleaned), or says why it could not be read.
func (b *bundle) list(path, what string, read func() (any, error)) {
	obj, err := read()
	if err != nil {
		b.failed(what, err)
		return
	}
	js, err := json.Marshal(obj)
	if err != nil {
		b.failed(what, err)
		return
	}
	var tree any
	if err := json.Unmarshal(js, &tree); err != nil {
		b.failed(what, err)
		return
	}
	data, err := yaml.Marshal(cleaned(tree))
	if err != nil {
		b.failed(what, err)
		return
	}
	b.add(path, data)
}

// secretName is an environment variable's name that says its value is a
// credential.
var secretName = regexp.MustCompile(`(?i)token|password|secret|key|cert|credential`)

// cleaned drops from every object in tree its managed fields and kubectl's
// last-applied annotation (the whole object as applied, a Secret's data
// included), and the values of environment variables named like
// credentials.
func cleaned(tree any) any {
	switch v := tree.(type) {
	case map[string]any:
		delete(v, "managedFields")
		if a, ok := v["annotations"].(map[string]any); ok {
			delete(a, corev1.LastAppliedConfigAnnotation)
		}
		if name, ok := v["name"].(string); ok && secretName.MatchString(name) {
			if _, ok := v["value"]; ok {
				v["value"] = "[redacted]"
			}
		}
		for _, child := range v {
			cleaned(child)
		}
	case []any:
		for _, child := range v {
			cleaned(child)
		}
	}
	return tree
}

func (b *bundle) addOr(path, what string, data []byte, err error) {
	if err != nil {
		b.failed(what, err)
		return
	}
	b.add(path, data)
}

func (b *bundle) failed(what string, err error) {
	b.manifest.Unreadable = append(b.manifest.Unreadable, Unreadable{What: what, Error: firstLine(err.Error())})
}

// add writes data, scrubbed, as path.
func (b *bundle) add(path string, data []byte) {
	if b.err != nil {
		return
	}
	data = scrub(data)
	hdr := &tar.Header{Name: path, Mode: 0o644, Size: int64(len(data)), ModTime: b.now, Typeflag: tar.TypeReg}
	if err := b.tw.WriteHeader(hdr); err != nil {
		b.err = err
		return
	}
	if _, err := b.tw.Write(data); err != nil {
		b.err = err
		return
	}
	if path != "manifest.json" {
		b.manifest.Files = append(b.manifest.Files, BundleFile{Path: path, Bytes: len(data)})
	}
}

// secretShapes are what a credential looks like in text: a JWT (every
// ServiceAccount token), a PEM block (a key or a certificate), and the
// value of a kubeconfig's or an object's credential field (base64 of a
// PEM, a static token, a password), also inside an annotation's JSON.
var secretShapes = []*regexp.Regexp{
	regexp.MustCompile(`eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*`),
	regexp.MustCompile(`(?s)-----BEGIN [A-Z ]+-----.*?-----END [A-Z ]+-----`),
	regexp.MustCompile(`(?i)("?(?:token|password|client-key-data|client-certificate-data|certificate-authority-data|ca\.crt|tls\.key|tls\.crt|kubeconfig)"?\s*[:=]\s*)("[^"]*"|[^\s",}]+)`),
}

// scrub replaces what looks like a credential with [redacted].
func scrub(data []byte) []byte {
	for i, re := range secretShapes {
		if i == len(secretShapes)-1 {
			data = re.ReplaceAll(data, []byte("${1}[redacted]"))
			continue
		}
		data = re.ReplaceAll(data, []byte("[redacted]"))
	}
	return data
}

// SecretSummary is what a bundle says of a member Secret: never its data.
type SecretSummary struct {
	Name        string            `json:"name"`
	Cluster     string            `json:"cluster"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Created     string            `json:"created"`
	Servers     []string          `json:"servers,omitempty"`
	Keys        []string          `json:"keys"`
	Credentials *CredentialReport `json:"credentials,omitempty"`
	Error       string            `json:"error,omitempty"`
}

// summarise says what each member Secret registers, without its data:
// the kubeconfig's servers, the keys it has, when its credentials expire.
func summarise(secrets []corev1.Secret) []SecretSummary {
	creds := credentialsOf(secrets)
	out := make([]SecretSummary, 0, len(secrets))
	for _, s := range secrets {
		cluster := s.Labels[api.LabelCluster]
		sum := SecretSummary{Name: s.Name, Cluster: cluster, Labels: s.Labels, Created: s.CreationTimestamp.UTC().Format(time.RFC3339), Credentials: creds[cluster]}
		for k, v := range s.Annotations {
			if k != corev1.LastAppliedConfigAnnotation { // the whole Secret, data and all
				if sum.Annotations == nil {
					sum.Annotations = map[string]string{}
				}
				sum.Annotations[k] = v
			}
		}
		for k := range s.Data {
			sum.Keys = append(sum.Keys, k)
		}
		slices.Sort(sum.Keys)
		if cfg, err := clientcmd.Load(s.Data[api.KeyKubeconfig]); err != nil {
			sum.Error = "its kubeconfig: " + firstLine(err.Error())
		} else {
			for _, c := range cfg.Clusters {
				sum.Servers = append(sum.Servers, c.Server)
			}
			slices.Sort(sum.Servers)
		}
		out = append(out, sum)
	}
	return out
}
