package members

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// fromContexts makes a member of every context of an operator's kubeconfig.
// Every context whose name cannot be a cluster name is reported at once,
// since kubeconfigs as kubeadm and the clouds write them have none that can.
func fromContexts(path string, qps float32, burst int) ([]*Member, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("--clusters-kubeconfig %s: %w", path, err)
	}
	names := slices.Sorted(maps.Keys(cfg.Contexts))
	if err := contextNames(path, names); err != nil {
		return nil, err
	}
	var out []*Member
	for _, name := range names {
		source := fmt.Sprintf("context %s of %s", name, path)
		rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		m, err := fromConfig(name, source, rc, qps, burst)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func contextNames(path string, names []string) error {
	var bad []string
	for _, name := range names {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			bad = append(bad, fmt.Sprintf("context %q is not a cluster name (%s): rename it: kubectl --kubeconfig %s config rename-context %s %s",
				name, errs[0], path, name, suggestName(name)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("--clusters-kubeconfig %s: %s", path, strings.Join(bad, "; "))
	}
	return nil
}

// suggestName is a DNS label made of name, for the fix a message
// suggests: kubeadm's kubernetes-admin@kubernetes, GKE's
// gke_project_zone_name and EKS's ARNs all have one.
func suggestName(name string) string {
	s := strings.Trim(invalidRun.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if len(s) > validation.DNS1123LabelMaxLength {
		s = strings.TrimRight(s[len(s)-validation.DNS1123LabelMaxLength:], "-")
		s = strings.TrimLeft(s, "-")
	}
	if s == "" || len(validation.IsDNS1123Label(s)) > 0 {
		return "NEW-NAME"
	}
	return s
}

var invalidRun = regexp.MustCompile(`[^a-z0-9]+`)

// fromConfig makes a member reached through a REST config.
func fromConfig(name, source string, rc *rest.Config, qps float32, burst int) (*Member, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = qps, burst
	rc.UserAgent = "mcs-controller/" + name
	bounded := &answers{name: name}
	rc.Wrap(bounded.wrap)
	// Custom resources only speak JSON; built-in types are cheaper as protobuf.
	kubeRC := rest.CopyConfig(rc)
	kubeRC.ContentType = runtime.ContentTypeProtobuf
	kube, err := kubernetes.NewForConfig(kubeRC)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, source, err)
	}
	mcs, err := mcsclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, source, err)
	}
	// A client of its own, rate limiter included: a probe or a renewal
	// waiting behind a burst of writes would count the member as cut off,
	// or let its Leases expire.
	control, err := kubernetes.NewForConfig(kubeRC)
	if err != nil {
		return nil, fmt.Errorf("%s (%s): %w", name, source, err)
	}
	m := New(name, source, kube, mcs)
	m.Control = control
	bounded.member.Store(m)
	return m, nil
}

// connectFunc makes the clients of a member from its config.
type connectFunc func(name, source string, rc *rest.Config) (*Member, error)

// fromSecret makes the member a Secret registers, from its kubeconfig,
// which anyone who may create a Secret there wrote (untrustedConfig); its
// token goes through a source of its own (rotate.go).
func fromSecret(name, source string, s *corev1.Secret, connect connectFunc, allowInsecure bool) (*Member, error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, refuse(reasonName, "%s: label %s=%q is not a cluster name (%s): relabel it: kubectl -n %s label secret %s %s=%s --overwrite",
			source, api.LabelCluster, name, errs[0], s.Namespace, s.Name, api.LabelCluster, suggestName(name))
	}
	data, ok := s.Data[api.KeyKubeconfig]
	if !ok {
		return nil, refuse(reasonInvalid, "%s: no key %q", source, api.KeyKubeconfig)
	}
	rc, err := untrustedConfig(data, allowInsecure)
	if err != nil {
		return nil, fmt.Errorf("%s: key %s: %w", source, api.KeyKubeconfig, err)
	}
	b, err := secretBound(s.Annotations, source)
	if err != nil {
		return nil, err
	}
	cred, print := credentials.Of(rc.BearerToken, rc.CertData, s.Annotations), fingerprint(rc, s)
	token := takeToken(rc)
	m, err := connect(name, source, rc)
	if err != nil {
		return nil, err
	}
	if b != nil {
		m.bounds = append(m.bounds, *b)
	}
	m.credential, m.token, m.fingerprint = cred, token, print
	return m, nil
}
