package members

import (
	"fmt"

	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// fromContexts makes a member of every context of an operator's kubeconfig.
func fromContexts(path string, qps float32, burst int) ([]*Member, error) {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("--clusters-kubeconfig %s: %w", path, err)
	}
	var out []*Member
	for _, name := range slices.Sorted(maps.Keys(cfg.Contexts)) {
		source := fmt.Sprintf("context %s of %s", name, path)
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return nil, fmt.Errorf("%s: %q is not a cluster name: %s", source, name, errs[0])
		}
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

// fromConfig makes a member reached through a REST config.
func fromConfig(name, source string, rc *rest.Config, qps float32, burst int) (*Member, error) {
	rc = rest.CopyConfig(rc)
	rc.QPS, rc.Burst = qps, burst
	rc.UserAgent = "mcs-controller/" + name
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
	return New(name, source, kube, mcs), nil
}

// fromSecret makes the member a Secret registers, from its kubeconfig.
func fromSecret(name, source string, s *corev1.Secret, qps float32, burst int) (*Member, error) {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return nil, fmt.Errorf("%s: label %s=%q is not a cluster name: %s", source, api.LabelCluster, name, errs[0])
	}
	data, ok := s.Data[api.KeyKubeconfig]
	if !ok {
		return nil, fmt.Errorf("%s: no key %q", source, api.KeyKubeconfig)
	}
	rc, err := clientcmd.RESTConfigFromKubeConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: key %s: %w", source, api.KeyKubeconfig, err)
	}
	return fromConfig(name, source, rc, qps, burst)
}
