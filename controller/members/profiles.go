package members

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	inventory "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	inventoryinformers "sigs.k8s.io/cluster-inventory-api/client/informers/externalversions"

	"github.com/coredns-mcs/coredns-mcs/api/handler"
)

// Members from ClusterProfiles (the Cluster Inventory API): each profile in
// Options.ProfileNamespace registers the member of its name, reached as
// access.go says. A profile is decided on as a Secret is (secrets.go): its
// name is the cluster's; one that goes retires its member; one that cannot
// be used registers a member that cannot be reached and says why, and is
// reported on the profile (a Warning Event) as a refused Secret is. What a
// profile says is honoured so:
//
//   - ControlPlaneHealthy=False: the member is registered as one that
//     cannot be reached, with the profile's reason, until the condition
//     changes; it is not retired, as the controller could not clean what it
//     wrote there, and what it provided goes as for any unreachable
//     member, once its Leases expire. Unknown, or no condition, leaves it
//     to the controller's own probe.
//   - the property cluster.clusterset.k8s.io (KEP-2149's cluster ID), when
//     the profile has it, must be the profile's name: else the cluster
//     would call itself by another name than the fleet does (its CoreDNS
//     reads the ClusterProperty of that name), and the profile is refused.
//
// One name from a Secret and a profile: the registration in use keeps it,
// else the older object (a Secret on a tie); the other is refused with
// reason duplicate, and takes over once the one in use goes.

// PropertyClusterID is the property of a ClusterProfile that names the
// cluster in its ClusterSet (KEP-2149's ClusterProperty).
const PropertyClusterID = "cluster.clusterset.k8s.io"

// newProfileInformer makes the watch of ClusterProfiles; Run starts it.
func (r *Registry) newProfileInformer() {
	r.profileFactory = inventoryinformers.NewSharedInformerFactoryWithOptions(r.opts.Profiles, 0, inventoryinformers.WithNamespace(r.opts.ProfileNamespace))
	r.profiles = r.profileFactory.Apis().V1alpha1().ClusterProfiles().Informer()
	r.profileLister = r.profileFactory.Apis().V1alpha1().ClusterProfiles().Lister()
	_, _ = r.profiles.AddEventHandler(handler.Typed(r.profileChanged))
}

// profileChanged decides again on the profile's name, once everything
// naming members was listed (secretsChanged).
func (r *Registry) profileChanged(old, cur *inventory.ClusterProfile) {
	if old != nil && cur != nil && old.ResourceVersion == cur.ResourceVersion {
		return // a resync
	}
	r.decide.Lock()
	defer r.decide.Unlock()
	if cur == nil {
		r.unreport(profileSource(old))
	}
	if !r.informersSynced() {
		return
	}
	for _, p := range []*inventory.ClusterProfile{cur, old} {
		if p != nil {
			r.reconcile(p.Name)
			return
		}
	}
}

// profileNamed is the ClusterProfile of cluster name, nil when there is
// none or profiles are not watched.
func (r *Registry) profileNamed(name string) *inventory.ClusterProfile {
	if r.profiles == nil {
		return nil
	}
	p, err := r.profileLister.ClusterProfiles(r.opts.ProfileNamespace).Get(name)
	if err != nil && !apierrors.IsNotFound(err) { // a cache lister fails on nothing else
		klog.ErrorS(err, "Cannot read a ClusterProfile", "cluster", name)
	}
	return p
}

// profileNames are the names of every ClusterProfile listed.
func (r *Registry) profileNames() []string {
	if r.profiles == nil {
		return nil
	}
	var out []string
	for _, k := range r.profiles.GetStore().ListKeys() {
		if _, name, err := cache.SplitMetaNamespaceKey(k); err == nil {
			out = append(out, name)
		}
	}
	return out
}

// profileHolds reports whether profile p, rather than a Secret, should
// register its name now: it does already; or nothing that keeps the name
// holds it, and p is older than every Secret naming it.
func (r *Registry) profileHolds(p *inventory.ClusterProfile, secrets []*corev1.Secret) bool {
	cur := r.get(p.Name)
	switch {
	case cur == nil:
	case cur.Retiring():
		return false // who takes over is decided once it is cleaned
	case cur.profile == profileSource(p):
		return true
	case cur.secret == "":
		return false // a context
	case slices.ContainsFunc(secrets, is(cur.secret)):
		return false // the Secret in use keeps it
	}
	return len(secrets) == 0 || p.CreationTimestamp.Before(&secrets[0].CreationTimestamp)
}

// reconcileProfile registers the member of profile p, which holds its name
// (profileHolds): a Secret's member whose Secret went retires first, and
// every Secret naming it is refused. The caller holds decide.
func (r *Registry) reconcileProfile(p *inventory.ClusterProfile, secrets []*corev1.Secret) {
	name, source := p.Name, profileSource(p)
	if r.candidates[name] != nil {
		r.dropCandidate(name)
	}
	if cur := r.get(name); cur != nil && cur.profile != source && !cur.Retiring() {
		r.remove(name, cur.Source) // its Secret went
	}
	for _, s := range secrets {
		r.refuse(s, refuse(reasonDuplicate, "%s: cluster %s is registered already, by %s: %s", sourceOf(s), name, source, duplicateFix(r.get(name))))
	}
	cur := r.get(name)
	if cur != nil && cur.Retiring() {
		klog.InfoS("ClusterProfile waits until the member it names is cleaned", "cluster", name, "profile", source)
		return
	}
	r.registerProfile(p, cur)
}

// registerProfile registers the member p makes, unless cur is it already:
// a profile's status changes with every heartbeat of its cluster manager,
// and only a change of what reaches the member, or of whether it may be
// used, registers it anew.
func (r *Registry) registerProfile(p *inventory.ClusterProfile, cur *Member) {
	name, source := p.Name, profileSource(p)
	rc, err := r.checkProfile(p)
	print := profilePrint(p, err)
	if cur != nil && cur.profile == source && cur.profilePrint == print {
		return
	}
	var m *Member
	if err == nil {
		m, err = r.connect(name, source, rc)
	}
	if err != nil {
		r.report(p, source, p.ResourceVersion, name, err)
		m = brokenMember(name, source, err)
	} else {
		r.unreport(source)
	}
	m.profile, m.profilePrint = source, print
	r.put(r.bounded(m))
}

// checkProfile is the REST config of the member p registers, or why it
// cannot be used.
func (r *Registry) checkProfile(p *inventory.ClusterProfile) (*rest.Config, error) {
	source := profileSource(p)
	if errs := validation.IsDNS1123Label(p.Name); len(errs) > 0 {
		return nil, refuse(reasonName, "%s: its name is not a cluster name (%s): create it again under a name that is (%s)", source, errs[0], suggestName(p.Name))
	}
	for _, prop := range p.Status.Properties {
		if prop.Name == PropertyClusterID && prop.Value != p.Name {
			return nil, refuse(reasonProperty, "%s: status.properties %s is %q, not the profile's name %q: the member is registered under its profile's name, and its CoreDNS would call it %q; rename one so that they match", source, PropertyClusterID, prop.Value, p.Name, prop.Value)
		}
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, inventory.ClusterConditionControlPlaneHealthy); c != nil && c.Status == metav1.ConditionFalse {
		return nil, refuse(reasonUnhealthy, "%s: its cluster manager says %s=False (%s: %s); the member counts as unreachable until it says otherwise", source, inventory.ClusterConditionControlPlaneHealthy, c.Reason, c.Message)
	}
	rc, err := profileConfig(p, r.opts.Access, r.opts.AllowInsecureTLS)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return rc, nil
}

// profilePrint fingerprints what registers a profile's member: its access
// providers, and why it cannot be used, if it cannot.
func profilePrint(p *inventory.ClusterProfile, err error) [sha256.Size]byte {
	data, _ := json.Marshal(struct { // plain data: never fails
		Access, Credential []inventory.AccessProvider
		Err                string
	}{p.Status.AccessProviders, p.Status.CredentialProviders, fmt.Sprint(err)})
	return sha256.Sum256(data)
}

func profileSource(p *inventory.ClusterProfile) string {
	return "clusterprofile " + p.Namespace + "/" + p.Name
}
