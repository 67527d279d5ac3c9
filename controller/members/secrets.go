package members

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
)

// Who holds a cluster name, when several registrations claim it: a context
// (or a member of Options.Members) always; else the Secret in use, as long
// as it exists, so that nobody who may create a Secret can take over a
// member at run time; else the oldest Secret, by creation time then name,
// so that a restart picks the same one as before rather than whichever the
// list returned first. Every other Secret naming it is refused and
// reported, and waits: it takes over once the one in use is gone (deleted
// or relabelled, and cleaned if it was retiring), as it would at the next
// restart anyway.

// EventRefused is the reason of the Warning Event on a refused Secret.
const EventRefused = "MemberRefused"

// newSecretInformer makes the watch of member Secrets; Run starts it.
func (r *Registry) newSecretInformer() {
	r.factory = informers.NewSharedInformerFactoryWithOptions(r.opts.Hub, 0, informers.WithNamespace(r.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = api.LabelCluster }))
	r.secrets = r.factory.Core().V1().Secrets().Informer()
	r.lister = r.factory.Core().V1().Secrets().Lister()
	_, _ = r.secrets.AddEventHandler(handler.Typed(r.secretChanged))
}

// watchSecrets starts the watch of member Secrets and, if any, of
// ClusterProfiles (profiles.go), and decides on every name they hold once
// both have listed.
func (r *Registry) watchSecrets(ctx context.Context) {
	r.factory.Start(ctx.Done())
	if r.profiles != nil {
		r.profileFactory.Start(ctx.Done())
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), r.informersSynced) {
			r.reconcileAll()
		}
	}()
	go func() {
		<-ctx.Done()
		r.factory.Shutdown()
		if r.profiles != nil {
			r.profileFactory.Shutdown()
		}
	}()
}

// informersSynced reports whether the Secrets and profiles, if watched,
// have listed: who holds a name depends on both.
func (r *Registry) informersSynced() bool {
	return r.secrets.HasSynced() && (r.profiles == nil || r.profiles.HasSynced())
}

// secretChanged decides again on the names a Secret had and has. Until the
// first list is in the cache, nothing is decided: who holds a name depends
// on every Secret naming it.
func (r *Registry) secretChanged(old, cur *corev1.Secret) {
	if old != nil && cur != nil && old.ResourceVersion == cur.ResourceVersion {
		return // a resync
	}
	r.decide.Lock()
	defer r.decide.Unlock()
	if cur == nil {
		r.unreport(sourceOf(old))
	}
	if !r.informersSynced() {
		return
	}
	for _, name := range clusterNames(old, cur) {
		r.reconcile(name)
	}
}

func (r *Registry) reconcileAll() {
	r.decide.Lock()
	defer r.decide.Unlock()
	names := map[string]bool{}
	for _, s := range r.listSecrets() {
		names[s.Labels[api.LabelCluster]] = true
	}
	for _, name := range r.profileNames() {
		names[name] = true
	}
	for _, m := range r.List() {
		names[m.Name] = names[m.Name] || m.secret != "" || m.profile != ""
	}
	for name, ok := range names {
		if ok {
			r.reconcile(name)
		}
	}
	r.listed.Store(true)
}

// reconcile makes the registration of cluster name follow the Secrets and
// the ClusterProfile that name it (see the top of this file and of
// profiles.go). The caller holds decide.
func (r *Registry) reconcile(name string) {
	secrets := r.naming(name)
	profile := r.profileNamed(name)
	if profile != nil && r.profileHolds(profile, secrets) {
		r.reconcileProfile(profile, secrets)
		return
	}
	if cur := r.get(name); cur != nil && cur.profile != "" && !cur.Retiring() {
		r.remove(name, cur.Source) // its ClusterProfile went
	}
	if c := r.candidates[name]; c != nil && !slices.ContainsFunc(secrets, c.of) {
		r.dropCandidate(name) // its Secret changed again, or went
	}
	if cur := r.get(name); cur != nil && cur.secret != "" && !cur.Retiring() && !slices.ContainsFunc(secrets, is(cur.secret)) {
		r.remove(name, cur.Source) // its Secret went
	}
	cur := r.get(name)
	if cur != nil && cur.Retiring() {
		if len(secrets) > 0 {
			klog.InfoS("Member Secret waits until the member it names is cleaned", "cluster", name, "secret", key(secrets[0]))
		}
		if profile != nil {
			klog.InfoS("ClusterProfile waits until the member it names is cleaned", "cluster", name, "profile", profileSource(profile))
		}
		return
	}
	winner := holder(cur, secrets)
	if winner != nil && (cur == nil || cur.secretRV != winner.ResourceVersion) {
		r.register(winner)
	}
	for _, s := range secrets {
		if s != winner {
			r.refuse(s, refuse(reasonDuplicate, "%s: cluster %s is registered already, by %s: %s", sourceOf(s), name, heldBy(cur, winner), duplicateFix(cur)))
		}
	}
	if profile != nil {
		r.report(profile, profileSource(profile), profile.ResourceVersion, name,
			refuse(reasonDuplicate, "%s: cluster %s is registered already, by %s: %s", profileSource(profile), name, heldBy(cur, winner), duplicateFix(cur)))
	}
}

// holder is the Secret that registers the name, nil when a context holds it
// or no Secret names it.
func holder(cur *Member, secrets []*corev1.Secret) *corev1.Secret {
	switch {
	case cur != nil && cur.secret == "":
		return nil
	case cur != nil:
		if i := slices.IndexFunc(secrets, is(cur.secret)); i >= 0 {
			return secrets[i]
		}
	}
	if len(secrets) > 0 {
		return secrets[0]
	}
	return nil
}

func heldBy(cur *Member, winner *corev1.Secret) string {
	if cur != nil {
		return cur.Source
	}
	return sourceOf(winner)
}

func duplicateFix(cur *Member) string {
	if cur != nil && cur.secret == "" && cur.profile == "" {
		return "a context always wins over a Secret or a ClusterProfile; delete this one, or name another cluster"
	}
	return "the Secret or ClusterProfile in use (else the oldest) wins, and this one is not used; delete whichever of the two is wrong (this one takes over once the other goes)"
}

// register makes the member a Secret registers; one that cannot be used
// registers a broken member that says why: an unreachable member, never a
// removed one, so nothing it provided is deleted because of a typo. A
// change that breaks the Secret of a usable member is refused instead.
func (r *Registry) register(s *corev1.Secret) {
	name, source := s.Labels[api.LabelCluster], sourceOf(s)
	m, err := fromSecret(name, source, s, r.connect, r.opts.AllowInsecureTLS)
	if err == nil && r.rotate(s, m) {
		r.dropCandidate(name)
		return
	}
	cur := r.get(name)
	switch {
	case err != nil && cur != nil && cur.secret == key(s) && cur.Kube != nil:
		// A bad edit of a working member's Secret: the member goes on as
		// it was, as it does when a duplicate is refused.
		r.refuse(s, fmt.Errorf("%w; %s keeps its registration from this Secret's resourceVersion %s until the Secret is fixed", err, name, cur.secretRV))
		return
	case err == nil && cur != nil && cur.secret == key(s) && cur.Healthy():
		r.try(s, m) // candidate.go
		return
	}
	r.dropCandidate(name)
	r.install(s, m, err)
}

// registerAnew registers the member Secret s makes, in place of the one
// registered, with no trial. The caller holds decide.
func (r *Registry) registerAnew(s *corev1.Secret) {
	m, err := fromSecret(s.Labels[api.LabelCluster], sourceOf(s), s, r.connect, r.opts.AllowInsecureTLS)
	r.install(s, m, err)
}

// install registers m, made of Secret s; when err says s cannot be used, a
// broken member that says why. The caller holds decide.
func (r *Registry) install(s *corev1.Secret, m *Member, err error) {
	name, source := s.Labels[api.LabelCluster], sourceOf(s)
	if err != nil {
		r.refuse(s, err)
		m = brokenMember(name, source, err)
	} else {
		r.unreport(sourceOf(s))
	}
	m.secret, m.secretRV = key(s), s.ResourceVersion
	r.put(r.bounded(m))
}

// naming lists the Secrets that name cluster name, oldest first.
func (r *Registry) naming(name string) []*corev1.Secret {
	var out []*corev1.Secret
	for _, s := range r.listSecrets() {
		if s.Labels[api.LabelCluster] == name {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Secret) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

func (r *Registry) listSecrets() []*corev1.Secret {
	out, err := r.lister.List(labels.Everything())
	if err != nil { // a cache lister never fails
		klog.ErrorS(err, "Cannot list member Secrets")
	}
	return out
}

// refusalState is what was last reported of a refused Secret or profile,
// so that a refusal is logged and recorded once per change of it.
type refusalState struct{ rv, reason, msg string }

// refuse reports that Secret s registers no usable member.
func (r *Registry) refuse(s *corev1.Secret, err error) {
	r.report(s, sourceOf(s), s.ResourceVersion, s.Labels[api.LabelCluster], err)
}

// report reports that obj (a Secret or a ClusterProfile, source at
// resourceVersion rv) registers no usable member of cluster: logged, a
// Warning Event on obj, and counted in mcs_member_registrations_refused.
func (r *Registry) report(obj runtime.Object, source, rv, cluster string, err error) {
	reason := reasonInvalid
	if rf := (*refusal)(nil); errors.As(err, &rf) {
		reason = rf.reason
	}
	now := refusalState{rv: rv, reason: reason, msg: err.Error()}
	was, ok := r.refused[source]
	if ok && was == now {
		return
	}
	if ok {
		refusedGauge.WithLabelValues(was.reason).Dec()
	}
	r.refused[source] = now
	refusedGauge.WithLabelValues(reason).Inc()
	kind, ref, _ := strings.Cut(source, " ")
	klog.ErrorS(err, refusedLog[kind], "cluster", cluster, kind, ref, "reason", reason)
	if r.opts.Recorder != nil {
		r.opts.Recorder.Event(obj, corev1.EventTypeWarning, EventRefused, err.Error())
	}
}

// refusedLog is the log message of a refusal, by the kind of source.
var refusedLog = map[string]string{"secret": "Member Secret refused", "clusterprofile": "Member ClusterProfile refused"}

// unreport forgets the refusal of source, which now registers its member
// or is gone.
func (r *Registry) unreport(source string) {
	if was, ok := r.refused[source]; ok {
		refusedGauge.WithLabelValues(was.reason).Dec()
		delete(r.refused, source)
	}
}

// forgetRefusals takes this registry's refusals out of the gauge, once it
// stops.
func (r *Registry) forgetRefusals() {
	r.decide.Lock()
	defer r.decide.Unlock()
	for k, was := range r.refused {
		refusedGauge.WithLabelValues(was.reason).Dec()
		delete(r.refused, k)
	}
}

// clusterNames are the names a Secret has and had: the new name first, so
// that a relabelled Secret registers its new name before its old one
// retires (the controller hands the cluster over, identity.go).
func clusterNames(old, cur *corev1.Secret) []string {
	var out []string
	for _, s := range []*corev1.Secret{cur, old} {
		if s != nil && !slices.Contains(out, s.Labels[api.LabelCluster]) {
			out = append(out, s.Labels[api.LabelCluster])
		}
	}
	return out
}

func key(s *corev1.Secret) string { return s.Namespace + "/" + s.Name }

func is(secret string) func(*corev1.Secret) bool {
	return func(s *corev1.Secret) bool { return key(s) == secret }
}

func sourceOf(s *corev1.Secret) string { return "secret " + key(s) }
