package members

import (
	"fmt"
	"maps"
	"net/url"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// A member Secret's kubeconfig is written by anyone who may create a Secret
// in the controller's namespace, so it is untrusted: a credential plugin
// would run a command in the controller, and a path would read one of the
// controller's files (its own ServiceAccount token, say) and send it to a
// server the Secret names. Only inline credentials are accepted. The
// operator's --clusters-kubeconfig is trusted and keeps every feature.

// maxKubeconfig bounds a Secret's kubeconfig. The API server already
// refuses a Secret above 1 MiB; the bound is checked again so that parsing
// never depends on where the Secret came from.
const maxKubeconfig = 1 << 20

// Reasons a registration is refused: the values of the reason label of
// mcs_member_registrations_refused.
const (
	reasonName      = "name"       // the cluster label is not a DNS label
	reasonDuplicate = "duplicate"  // the cluster is registered already
	reasonInvalid   = "invalid"    // no usable kubeconfig
	reasonPlugin    = "plugin"     // exec or auth-provider: would run code in the controller
	reasonLocalFile = "local-file" // a path: would read the controller's files
	reasonInsecure  = "insecure"   // the member's server would not be verified
	reasonProxy     = "proxy"      // the member's traffic would go through a proxy the Secret names
	reasonProperty  = "property"   // a ClusterProfile's cluster.clusterset.k8s.io is not its name
	reasonUnhealthy = "unhealthy"  // a ClusterProfile says ControlPlaneHealthy=False
)

var reasons = []string{reasonName, reasonDuplicate, reasonInvalid, reasonPlugin, reasonLocalFile, reasonInsecure, reasonProxy, reasonProperty, reasonUnhealthy}

// refusal is an error that says which reason it counts under.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(reason, format string, args ...any) error {
	return &refusal{reason: reason, err: fmt.Errorf(format, args...)}
}

// untrustedConfig makes the REST config of a Secret's kubeconfig, once its
// only context, that context's cluster and its user carry nothing but
// inline credentials. Only what was checked reaches clientcmd: other
// clusters and users the file may hold are dropped unread.
func untrustedConfig(data []byte, allowInsecure bool) (*rest.Config, error) {
	if len(data) > maxKubeconfig {
		return nil, refuse(reasonInvalid, "%d bytes, more than the %d a Secret may hold", len(data), maxKubeconfig)
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, refuse(reasonInvalid, "%w", err)
	}
	name, err := onlyContext(cfg)
	if err != nil {
		return nil, err
	}
	pruned, err := prune(cfg, name, allowInsecure)
	if err != nil {
		return nil, err
	}
	rc, err := clientcmd.NewNonInteractiveClientConfig(*pruned, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, refuse(reasonInvalid, "%w", err)
	}
	return rc, nil
}

// onlyContext is the kubeconfig's one context. Several are refused rather
// than picking current-context: a Secret registers one cluster, and which
// one must not depend on a field a reader easily overlooks.
func onlyContext(cfg *clientcmdapi.Config) (string, error) {
	names := slices.Sorted(maps.Keys(cfg.Contexts))
	switch {
	case len(names) != 1:
		return "", refuse(reasonInvalid, "has %d contexts %q, want exactly one", len(names), names)
	case cfg.CurrentContext != "" && cfg.CurrentContext != names[0]:
		return "", refuse(reasonInvalid, "current-context %q is not its context %q", cfg.CurrentContext, names[0])
	}
	return names[0], nil
}

// prune checks the context's cluster and user, and returns a kubeconfig of
// them alone.
func prune(cfg *clientcmdapi.Config, name string, allowInsecure bool) (*clientcmdapi.Config, error) {
	ctx := cfg.Contexts[name]
	out := clientcmdapi.NewConfig()
	out.Contexts[name], out.CurrentContext = ctx, name
	if c := cfg.Clusters[ctx.Cluster]; c != nil {
		if err := checkCluster(ctx.Cluster, c, allowInsecure); err != nil {
			return nil, err
		}
		out.Clusters[ctx.Cluster] = c
	}
	if u := cfg.AuthInfos[ctx.AuthInfo]; u != nil {
		if err := checkUser(ctx.AuthInfo, u); err != nil {
			return nil, err
		}
		out.AuthInfos[ctx.AuthInfo] = u
	}
	return out, nil
}

func checkCluster(name string, c *clientcmdapi.Cluster, allowInsecure bool) error {
	field := func(f string) string { return fmt.Sprintf("clusters[%q].cluster.%s", name, f) }
	if c.CertificateAuthority != "" {
		return refuse(reasonLocalFile, "%s is refused: it would read a file of the controller; use certificate-authority-data", field("certificate-authority"))
	}
	// A proxy would see where the controller goes and, for http, what it
	// sends; and it lets a Secret make the controller reach any address.
	if c.ProxyURL != "" {
		return refuse(reasonProxy, "%s is refused: the member's traffic would go through a proxy the Secret names; reach the member's server directly", field("proxy-url"))
	}
	if allowInsecure {
		return nil
	}
	if c.InsecureSkipTLSVerify {
		return refuse(reasonInsecure, "%s is refused: the member's server would not be verified; give certificate-authority-data, or start the controller with --allow-insecure-member-tls", field("insecure-skip-tls-verify"))
	}
	// client-go speaks plain http to a server without a scheme when no
	// TLS field is set, so anything but https:// is refused.
	if u, err := url.Parse(c.Server); err != nil || u.Scheme != "https" || u.Host == "" {
		return refuse(reasonInsecure, "%s %q is refused: without https:// the credentials may cross the network in clear; write it as https://host:port, or start the controller with --allow-insecure-member-tls", field("server"), c.Server)
	}
	return nil
}

func checkUser(name string, u *clientcmdapi.AuthInfo) error {
	field := func(f string) string { return fmt.Sprintf("users[%q].user.%s", name, f) }
	switch {
	case u.Exec != nil:
		return refuse(reasonPlugin, "%s is refused: it would run %q in the controller; use token, or client-certificate-data and client-key-data", field("exec"), u.Exec.Command)
	case u.AuthProvider != nil:
		return refuse(reasonPlugin, "%s is refused: it would run the %q plugin in the controller; use token, or client-certificate-data and client-key-data", field("auth-provider"), u.AuthProvider.Name)
	case u.TokenFile != "":
		return refuse(reasonLocalFile, "%s is refused: it would read a file of the controller; use token", field("tokenFile"))
	case u.ClientCertificate != "":
		return refuse(reasonLocalFile, "%s is refused: it would read a file of the controller; use client-certificate-data", field("client-certificate"))
	case u.ClientKey != "":
		return refuse(reasonLocalFile, "%s is refused: it would read a file of the controller; use client-key-data", field("client-key"))
	}
	return nil
}
