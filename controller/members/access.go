package members

import (
	"errors"
	"fmt"
	"os"
	"slices"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clientcmdlatest "k8s.io/client-go/tools/clientcmd/api/latest"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/cluster-inventory-api/pkg/access"
	"sigs.k8s.io/yaml"
)

// A ClusterProfile (the Cluster Inventory API) says where a member's API
// server is and which access providers reach it; how a provider gets
// credentials is the consumer's, here the operator's access-provider file
// (KEP-5339, read by the upstream pkg/access): its exec plugins run in the
// controller, so they come from that file alone, never from a profile.
// What a profile says of the server is checked as a Secret's kubeconfig
// cluster is (untrusted.go): anyone who may write a ClusterProfile in the
// namespace may name any server.

// maxProviderFile bounds the access-provider file: it is the operator's,
// but a path mistaken for another file should fail fast and clearly.
const maxProviderFile = 1 << 20

// LoadAccessProviders reads the operator's access-provider file, in the
// format of pkg/access (JSON, or the same in YAML), strictly: a field it
// does not know, a provider without a name or a command, a name given
// twice or a policy pkg/access does not know is an error that says where,
// rather than a member that cannot be reached later.
func LoadAccessProviders(path string) (*access.Config, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("access-provider file %s: %s", path, fmt.Sprintf(format, args...))
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, fail("%v", errors.Unwrap(err))
	}
	if info.Size() > maxProviderFile {
		return nil, fail("%d bytes, more than the %d an access-provider file may take", info.Size(), maxProviderFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fail("%v", errors.Unwrap(err))
	}
	var cfg access.Config
	if err := yaml.UnmarshalStrict(data, &cfg); err != nil {
		return nil, fail("%v", err)
	}
	if len(cfg.Providers) == 0 {
		return nil, fail(`names no provider: want {"providers": [{"name": ..., "execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": ...}}]}`)
	}
	var names []string
	for i, p := range cfg.Providers {
		if err := checkProvider(p, names); err != nil {
			return nil, fail("providers[%d] (%q): %v", i, p.Name, err)
		}
		names = append(names, p.Name)
	}
	return access.New(cfg.Providers), nil
}

// execAPIVersions are the ExecCredential versions client-go speaks.
var execAPIVersions = []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"}

func checkProvider(p access.Provider, before []string) error {
	switch {
	case p.Name == "":
		return errors.New("name is empty")
	case slices.Contains(before, p.Name):
		return errors.New("name is given twice")
	case p.ExecConfig == nil:
		return errors.New("execConfig is missing")
	case p.ExecConfig.Command == "":
		return errors.New("execConfig.command is empty")
	case !slices.Contains(execAPIVersions, p.ExecConfig.APIVersion):
		return fmt.Errorf("execConfig.apiVersion %q is not one of %q", p.ExecConfig.APIVersion, execAPIVersions)
	}
	switch p.ProfileSourcedCLIArgsPolicy {
	case "", access.ProfileSourcedCLIArgsPolicyIgnore, access.ProfileSourcedCLIArgsPolicyAppend:
	default:
		return fmt.Errorf("profileSourcedCLIArgsPolicy %q is not Ignore or Append", p.ProfileSourcedCLIArgsPolicy)
	}
	switch p.ProfileSourcedEnvVarsPolicy {
	case "", access.ProfileSourcedEnvVarsPolicyIgnore, access.ProfileSourcedEnvVarsPolicyAppendIfNotExists, access.ProfileSourcedEnvVarsPolicyReplace:
	default:
		return fmt.Errorf("profileSourcedEnvVarsPolicy %q is not Ignore, AppendIfNotExists or Replace", p.ProfileSourcedEnvVarsPolicy)
	}
	return nil
}

// profileConfig is the REST config of the member profile p names, through
// the first of the operator's providers it lists. Every cluster the
// profile gives for one of those providers is checked first, as a member
// Secret's cluster is.
func profileConfig(p *inventory.ClusterProfile, providers *access.Config, allowInsecure bool) (*rest.Config, error) {
	for _, ap := range append(slices.Clone(p.Status.AccessProviders), p.Status.CredentialProviders...) {
		if !slices.ContainsFunc(providers.Providers, func(o access.Provider) bool { return o.Name == ap.Name }) {
			continue
		}
		c := clientcmdapi.NewCluster()
		if err := clientcmdlatest.Scheme.Convert(&ap.Cluster, c, nil); err != nil {
			return nil, refuse(reasonInvalid, "status.accessProviders %q: %w", ap.Name, err)
		}
		if err := checkCluster(ap.Name, c, allowInsecure); err != nil {
			return nil, fmt.Errorf("status.accessProviders: %w", err)
		}
	}
	rc, err := providers.BuildConfigFromCP(p)
	if err != nil {
		return nil, refuse(reasonInvalid, "%w (the providers of the access-provider file: %q)", err, providerNames(providers))
	}
	return rc, nil
}

func providerNames(c *access.Config) []string {
	var out []string
	for _, p := range c.Providers {
		out = append(out, p.Name)
	}
	return out
}
