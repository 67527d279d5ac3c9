package members

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
	"k8s.io/client-go/tools/record"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	inventoryfake "sigs.k8s.io/cluster-inventory-api/client/clientset/versioned/fake"
)

// providerFile is an operator's access-provider file with the upstream
// secret-reader plugin.
const providerFile = `{"providers": [{"name": "secretreader", "execConfig": {
  "apiVersion": "client.authentication.k8s.io/v1", "command": "/opt/plugins/secretreader", "provideClusterInfo": true}}]}`

// profileFixture runs a registry of the member Secrets of mcs-system and
// the ClusterProfiles of fleet, on fake hubs, whose members connect to
// hosts that answer unless set down.
type profileFixture struct {
	reg      *Registry
	hub      *k8sfake.Clientset
	profiles *inventoryfake.Clientset
	events   *eventLog
	mu       sync.Mutex
	configs  map[string]*rest.Config // by member name: what it was last connected with
}

func newProfileFixture(t *testing.T, objs ...runtime.Object) *profileFixture {
	t.Helper()
	var secrets, profiles []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*inventory.ClusterProfile); ok {
			profiles = append(profiles, o)
		} else {
			secrets = append(secrets, o)
		}
	}
	providers, err := LoadAccessProviders(writeFile(t, "providers.json", providerFile))
	if err != nil {
		t.Fatal(err)
	}
	h := &hosts{kube: map[string]*k8sfake.Clientset{}, down: map[string]bool{}}
	f := &profileFixture{
		hub: k8sfake.NewSimpleClientset(secrets...), profiles: inventoryfake.NewSimpleClientset(profiles...),
		events: &eventLog{rec: record.NewFakeRecorder(100)}, configs: map[string]*rest.Config{},
	}
	connect := h.connect(t)
	f.reg = runRegistry(t, Options{
		Hub: f.hub, Namespace: "mcs-system", Profiles: f.profiles, ProfileNamespace: "fleet", Access: providers,
		ProbeEvery: 10 * time.Millisecond, Ready: h.ready, Recorder: f.events.rec,
		Connect: func(name, source string, rc *rest.Config) (*Member, error) {
			f.mu.Lock()
			f.configs[name] = rc
			f.mu.Unlock()
			return connect(name, source, rc)
		},
	}, Handlers{})
	return f
}

func (f *profileFixture) config(name string) *rest.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.configs[name]
}

func (f *profileFixture) update(t *testing.T, p *inventory.ClusterProfile) {
	t.Helper()
	if _, err := f.profiles.ApisV1alpha1().ClusterProfiles(p.Namespace).Update(t.Context(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// profile is ClusterProfile fleet/name, created at creation (seconds),
// reached through the secret-reader provider at server.
func profile(name string, creation int64, server string) *inventory.ClusterProfile {
	return &inventory.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet", CreationTimestamp: metav1.Unix(creation, 0), ResourceVersion: "1"},
		Spec:       inventory.ClusterProfileSpec{ClusterManager: inventory.ClusterManager{Name: "ocm"}},
		Status: inventory.ClusterProfileStatus{
			Conditions: []metav1.Condition{{Type: inventory.ClusterConditionControlPlaneHealthy, Status: metav1.ConditionTrue, Reason: "Healthy"}},
			Properties: []inventory.Property{{Name: PropertyClusterID, Value: name}},
			AccessProviders: []inventory.AccessProvider{{Name: "secretreader", Cluster: clientcmdv1.Cluster{
				Server: server, CertificateAuthorityData: []byte("ca"),
				Extensions: []clientcmdv1.NamedExtension{{Name: "client.authentication.k8s.io/exec", Extension: runtime.RawExtension{Raw: []byte(`{"clusterName":"` + name + `"}`)}}},
			}}},
		},
	}
}

func withRV(p *inventory.ClusterProfile, rv string) *inventory.ClusterProfile {
	p = p.DeepCopy()
	p.ResourceVersion = rv
	return p
}

// A ClusterProfile registers the member of its name, reached at the
// server it names with the credentials of the operator's plugin, which the
// profile's exec extension is handed to; a status heartbeat that changes
// nothing of that keeps the member as it is.
func TestProfileRegistersMember(t *testing.T) {
	p := profile("member1", 100, "https://member1.example:6443")
	f := newProfileFixture(t, p)
	m := registeredBy(t, f.reg, "member1", "clusterprofile fleet/member1")
	eventually(t, func() error { return healthy(m) })
	rc := f.config("member1")
	if rc.Host != "https://member1.example:6443" || string(rc.CAData) != "ca" || rc.ExecProvider == nil || rc.ExecProvider.Command != "/opt/plugins/secretreader" {
		t.Fatalf("member1 is reached with host %q, CA %q, exec %+v; want the profile's server and CA and the operator's plugin", rc.Host, rc.CAData, rc.ExecProvider)
	}
	if cfg, ok := rc.ExecProvider.Config.(*runtime.Unknown); !ok || !strings.Contains(string(cfg.Raw), `"clusterName":"member1"`) {
		t.Errorf("the plugin is handed %#v, want the profile's exec extension", rc.ExecProvider.Config)
	}

	beat := withRV(p, "2")
	beat.Status.Properties[0].LastObservedTime = metav1.Unix(200, 0)
	beat.Status.Conditions[0].LastTransitionTime = metav1.Unix(200, 0)
	f.update(t, beat)
	moved := withRV(beat, "3")
	moved.Status.AccessProviders[0].Cluster.Server = "https://member1.example:7443"
	f.update(t, moved)
	eventually(t, func() error {
		if rc := f.config("member1"); rc.Host != "https://member1.example:7443" {
			return fmt.Errorf("member1 is reached at %s, want the profile's new server", rc.Host)
		}
		return nil
	})
	if f.reg.get("member1") == m {
		t.Fatal("member1 was not registered anew when its profile's server moved")
	}
}

// A ClusterProfile that goes retires its member as a deleted Secret does:
// it stays, retiring, until the controller has cleaned it.
func TestProfileDeletedRetiresMember(t *testing.T) {
	f := newProfileFixture(t, profile("member1", 100, "https://member1.example:6443"))
	m := registeredBy(t, f.reg, "member1", "clusterprofile fleet/member1")
	eventually(t, func() error { return healthy(m) })
	if err := f.profiles.ApisV1alpha1().ClusterProfiles("fleet").Delete(t.Context(), "member1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if !m.Retiring() || f.reg.get("member1") != m {
			return errors.New("member1 is not retiring")
		}
		return nil
	})
	f.reg.Retired("member1")
	if got := f.reg.get("member1"); got != nil {
		t.Fatalf("member1 is registered by %s once cleaned, want it gone", got.Source)
	}
}

// A profile whose cluster.clusterset.k8s.io is not its name is refused:
// its member cannot be reached and says why, and the profile carries a
// Warning Event; fixed, it registers the member.
func TestProfileClusterPropertyMismatch(t *testing.T) {
	p := profile("member1", 100, "https://member1.example:6443")
	p.Status.Properties[0].Value = "cluster-a"
	f := newProfileFixture(t, p)
	m := registeredBy(t, f.reg, "member1", "clusterprofile fleet/member1")
	if _, err := m.Reachable(); err == nil || !strings.Contains(err.Error(), `status.properties cluster.clusterset.k8s.io is "cluster-a", not the profile's name "member1"`) {
		t.Errorf("member1's error is %v, want it to name the property", err)
	}
	warned(t, f.events, "clusterprofile fleet/member1", "cluster.clusterset.k8s.io")
	refusedNow(t, reasonProperty, 1)
	if f.config("member1") != nil {
		t.Error("a refused profile's member was connected")
	}

	fixed := withRV(profile("member1", 100, "https://member1.example:6443"), "2")
	f.update(t, fixed)
	refusedNow(t, reasonProperty, 0)
	eventually(t, func() error { return healthy(f.reg.get("member1")) })
}

// ControlPlaneHealthy=False makes the member one that cannot be reached,
// not a retired one (nothing in it could be cleaned); True again registers
// it anew. Unknown leaves it to the probe.
func TestUnhealthyProfile(t *testing.T) {
	p := profile("member1", 100, "https://member1.example:6443")
	f := newProfileFixture(t, p)
	eventually(t, func() error { return healthy(f.reg.get("member1")) })

	down := withRV(p, "2")
	down.Status.Conditions[0].Status, down.Status.Conditions[0].Reason, down.Status.Conditions[0].Message = metav1.ConditionFalse, "LeaseExpired", "no heartbeat for 5m"
	f.update(t, down)
	eventually(t, func() error {
		m := f.reg.get("member1")
		if ok, err := m.Reachable(); ok || m.Retiring() || !strings.Contains(fmt.Sprint(err), "ControlPlaneHealthy=False (LeaseExpired: no heartbeat for 5m)") {
			return fmt.Errorf("member1 reachable %v, retiring %v, error %v; want unreachable with the profile's reason, not retiring", ok, m.Retiring(), err)
		}
		return nil
	})
	refusedNow(t, reasonUnhealthy, 1)

	unknown := withRV(p, "3")
	unknown.Status.Conditions[0].Status = metav1.ConditionUnknown
	f.update(t, unknown)
	refusedNow(t, reasonUnhealthy, 0)
	eventually(t, func() error { return healthy(f.reg.get("member1")) })
}

// One name from a Secret and a ClusterProfile: the registration in use
// keeps it, the other is refused with a Warning Event that says by whom,
// and takes over once the one in use is gone. With neither in use (a
// restart), the older wins.
func TestProfileAndSecretNameClash(t *testing.T) {
	kc := kubeconfig("https://secret.example:6443", "", "token: t")
	f := newProfileFixture(t, memberSecret("member1", "member1", 100, kc), profile("member1", 200, "https://member1.example:6443"),
		memberSecret("member2", "member2", 200, kc), profile("member2", 100, "https://member2.example:6443"))
	secret := registeredBy(t, f.reg, "member1", "secret mcs-system/member1")
	registeredBy(t, f.reg, "member2", "clusterprofile fleet/member2")
	warned(t, f.events, "clusterprofile fleet/member1: cluster member1 is registered already, by secret mcs-system/member1")
	warned(t, f.events, "secret mcs-system/member2: cluster member2 is registered already, by clusterprofile fleet/member2")
	refusedNow(t, reasonDuplicate, 2)

	// A profile edit fights nothing: the Secret's member stays.
	f.update(t, withRV(profile("member1", 200, "https://elsewhere.example:6443"), "2"))
	eventually(t, func() error { return healthy(secret) })
	if got := f.reg.get("member1"); got != secret {
		t.Fatalf("member1 is registered by %s after its profile changed, want the Secret's member", got.Source)
	}

	if err := f.hub.CoreV1().Secrets("mcs-system").Delete(t.Context(), "member1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() error {
		if !secret.Retiring() {
			return errors.New("member1 of the deleted Secret is not retiring")
		}
		return nil
	})
	f.reg.Retired("member1")
	registeredBy(t, f.reg, "member1", "clusterprofile fleet/member1")
	refusedNow(t, reasonDuplicate, 1)
}

// What a profile says of its server is checked as a Secret's kubeconfig
// is, and a profile that lists none of the operator's providers says so.
func TestProfileServerChecked(t *testing.T) {
	plain := profile("plain", 100, "http://plain.example:6443")
	proxied := profile("proxied", 100, "https://proxied.example:6443")
	proxied.Status.AccessProviders[0].Cluster.ProxyURL = "http://attacker.example:3128"
	other := profile("other", 100, "https://other.example:6443")
	other.Status.AccessProviders[0].Name = "token-exchange"
	dotted := profile("a.b", 100, "https://dotted.example:6443")
	f := newProfileFixture(t, plain, proxied, other, dotted)
	for name, want := range map[string]string{
		"plain":   `clusters["secretreader"].cluster.server "http://plain.example:6443" is refused`,
		"proxied": `clusters["secretreader"].cluster.proxy-url is refused`,
		"other":   `no matching cluster accessor found for cluster profile "other" (the providers of the access-provider file: ["secretreader"])`,
		"a.b":     "clusterprofile fleet/a.b: its name is not a cluster name",
	} {
		m := registeredBy(t, f.reg, name, "clusterprofile fleet/"+name)
		if _, err := m.Reachable(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s's error is %v, want %q", name, err, want)
		}
		if f.config(name) != nil {
			t.Errorf("%s: a refused profile's member was connected", name)
		}
	}
	refusedNow(t, reasonInsecure, 1)
	refusedNow(t, reasonProxy, 1)
	refusedNow(t, reasonInvalid, 1)
	refusedNow(t, reasonName, 1)
}

// An access-provider file that cannot be used is an error that names the
// file and what is wrong in it, never a panic nor a member that cannot be
// reached later.
func TestBadAccessProviderFile(t *testing.T) {
	exec := `"execConfig": {"apiVersion": "client.authentication.k8s.io/v1", "command": "p"}`
	for _, tc := range []struct{ name, content, want string }{
		{"empty", ``, "names no provider"},
		{"not json", `{"providers": [`, "error converting YAML to JSON"},
		{"no providers", `{"providers": []}`, "names no provider"},
		{"unknown field", `{"providers": [{"name": "a", ` + exec + `, "comand": "x"}]}`, `unknown field "comand"`},
		{"no name", `{"providers": [{` + exec + `}]}`, `providers[0] (""): name is empty`},
		{"twice", `{"providers": [{"name": "a", ` + exec + `}, {"name": "a", ` + exec + `}]}`, `providers[1] ("a"): name is given twice`},
		{"no exec", `{"providers": [{"name": "a"}]}`, `providers[0] ("a"): execConfig is missing`},
		{"no command", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "client.authentication.k8s.io/v1"}}]}`, "execConfig.command is empty"},
		{"version", `{"providers": [{"name": "a", "execConfig": {"apiVersion": "v1", "command": "p"}}]}`, `execConfig.apiVersion "v1" is not one of`},
		{"policy", `{"providers": [{"name": "a", ` + exec + `, "profileSourcedCLIArgsPolicy": "Always"}]}`, `profileSourcedCLIArgsPolicy "Always" is not Ignore or Append`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "providers.json", tc.content)
			_, err := LoadAccessProviders(path)
			if err == nil || !strings.Contains(err.Error(), "access-provider file "+path+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %s and saying %q", err, path, tc.want)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "none.json")
	if _, err := LoadAccessProviders(missing); err == nil || err.Error() != "access-provider file "+missing+": no such file or directory" {
		t.Fatalf("got %v for a missing file", err)
	}
	if cfg, err := LoadAccessProviders(writeFile(t, "p.yaml", "providers:\n- name: a\n  execConfig: {apiVersion: client.authentication.k8s.io/v1, command: p}\n")); err != nil || len(cfg.Providers) != 1 || cfg.Providers[0].ProfileSourcedCLIArgsPolicy != "" {
		t.Fatalf("a YAML file: %+v, %v", cfg, err)
	}
}
