package controller

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/handler"
	"github.com/coredns-mcs/coredns-mcs/controller/desired"
)

// Who was first is decided on the hub. KEP-1645's "oldest export wins"
// ages an export by when this controller first saw its member provide
// the service, never by the creationTimestamp the member reports, which a
// hostile member controls. Where the age decides anything, a service with
// two providers or more, the times are kept on the hub, in the ConfigMap
// export-ages.<namespace>.<name> of the controller's namespace, so that
// they survive restarts. A service of one provider costs no write: its
// age is when this run first saw it, older than any export to come.

// agesPrefix starts the name of an ages ConfigMap; a namespace has no dot,
// so the rest is <namespace>.<name>.
const agesPrefix = "export-ages."

// exportAges keeps the hub's ages ConfigMaps of this replica's services,
// and reads them with what this run noted (serviceState.firstSeen).
type exportAges struct {
	informer   cache.SharedIndexInformer
	hub        kubernetes.Interface
	namespace  string // the controller's, which holds them
	track      *tracker
	perService *serviceStates
	clock      clock.PassiveClock
	// renames maps each member renamed in this run to its former name.
	renames func() map[string]string
}

// watchAges makes the informer of the ages ConfigMaps. One someone else
// edits or deletes queues its service, whose sync writes it back.
func (c *Controller) watchAges() {
	f := informers.NewSharedInformerFactoryWithOptions(c.opts.HubKube, 0, informers.WithNamespace(c.opts.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.Set{api.LabelManagedBy: api.ManagedBy}.String()
		}),
		informers.WithTransform(func(obj any) (any, error) {
			if o, ok := obj.(metav1.Object); ok {
				o.SetManagedFields(nil)
			}
			return obj, nil
		}))
	c.hubFactories = append(c.hubFactories, f)
	c.ages = &exportAges{informer: f.Core().V1().ConfigMaps().Informer(), hub: c.opts.HubKube, namespace: c.opts.Namespace,
		track: c.track, perService: c.perService, clock: c.opts.Clock, renames: c.renames}
	_, _ = c.ages.informer.AddEventHandler(handler.Events(func(obj any, gone bool) {
		o, ok := handler.Unwrap(obj).(metav1.Object)
		if !ok {
			return
		}
		namespace, name, ok := agesService(o.GetName())
		if ok && !c.track.delivered(c.ages.key(namespace, name), o, gone) {
			c.enqueue(namespace, name)
		}
	}))
}

// agesService is the service an ages ConfigMap's name is of.
func agesService(configMap string) (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(configMap, agesPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, ".")
}

func (a *exportAges) key(namespace, name string) trackKey {
	return trackKey{cluster: "hub", kind: "ConfigMap", namespace: a.namespace, name: agesPrefix + namespace + "." + name}
}

// agesRecord is the service's ages ConfigMap as the hub's informer holds
// it, or as this controller last wrote it if that is newer; nil: none.
func (a *exportAges) record(namespace, name string) *corev1.ConfigMap {
	k := a.key(namespace, name)
	return latestOf(a.track, k, a.cached(k))
}

// agesCached is the ages ConfigMap of k as the informer holds it, or nil.
func (a *exportAges) cached(k trackKey) *corev1.ConfigMap {
	obj, _, _ := a.informer.GetStore().GetByKey(k.namespace + "/" + k.name)
	cm, _ := obj.(*corev1.ConfigMap)
	return cm
}

// firstSeenOf is when each member was first seen providing the service:
// what this run noted, else what the hub keeps.
func (a *exportAges) firstSeenOf(namespace, name string) map[string]time.Time {
	if seen := a.perService.get(namespace + "/" + name).firstSeen; len(seen) > 0 {
		return seen
	}
	return parseAges(a.record(namespace, name))
}

// parseAges reads an ages ConfigMap; an entry that is not a time is left
// out, so that its member is aged anew.
func parseAges(cm *corev1.ConfigMap) map[string]time.Time {
	seen := map[string]time.Time{}
	if cm == nil {
		return seen
	}
	for cluster, v := range cm.Data {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			seen[cluster] = t
		}
	}
	return seen
}

// keep notes when each provider of the plan was first seen, forgets
// members that no longer provide (a member not known now keeps its age),
// and keeps the hub's record of the service as that says.
func (a *exportAges) keep(ctx context.Context, in *desired.Input, plan *desired.Plan) error {
	seen := maps.Clone(a.firstSeenOf(in.Namespace, in.Name))
	var providers []string
	if plan.Import != nil {
		providers = plan.Import.Clusters
	}
	now, inherit := a.clock.Now(), a.inheritor(seen)
	for _, p := range providers {
		if _, ok := seen[p]; !ok {
			seen[p] = now
			if t, ok := inherit(p); ok {
				seen[p] = t
			}
		}
	}
	maps.DeleteFunc(seen, func(cluster string, _ time.Time) bool {
		m, member := in.Members[cluster]
		return !member || m.Known && !slices.Contains(providers, cluster)
	})
	key := in.Namespace + "/" + in.Name
	a.perService.update(key, func(s *serviceState) { s.firstSeen = seen })
	return a.write(ctx, in.Namespace, in.Name, seen)
}

// write makes the hub's record of the service hold seen when it
// has two members or more, and be absent otherwise.
func (a *exportAges) write(ctx context.Context, namespace, name string, seen map[string]time.Time) error {
	have := a.record(namespace, name)
	if len(seen) < 2 {
		if have == nil {
			return nil
		}
		return a.writeOne("delete", have, func() (*corev1.ConfigMap, error) {
			return nil, a.hub.CoreV1().ConfigMaps(have.Namespace).Delete(ctx, have.Name, preconditions(have))
		})
	}
	want := agesConfigMap(a.key(namespace, name), seen)
	if have == nil {
		return a.writeOne("create", want, func() (*corev1.ConfigMap, error) {
			return a.hub.CoreV1().ConfigMaps(want.Namespace).Create(ctx, want, metav1.CreateOptions{})
		})
	}
	if maps.Equal(have.Data, want.Data) && hasLabels(have, want.Labels) {
		return nil
	}
	upd := have.DeepCopy()
	upd.Data, upd.Labels = want.Data, want.Labels
	return a.writeOne("update", upd, func() (*corev1.ConfigMap, error) {
		return a.hub.CoreV1().ConfigMaps(upd.Namespace).Update(ctx, upd, metav1.UpdateOptions{})
	})
}

func agesConfigMap(k trackKey, seen map[string]time.Time) *corev1.ConfigMap {
	data := map[string]string{}
	for cluster, t := range seen {
		data[cluster] = t.UTC().Format(time.RFC3339Nano)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: k.namespace, Labels: map[string]string{api.LabelManagedBy: api.ManagedBy}},
		Data:       data,
	}
}

// writeOne runs one write of an ages ConfigMap, counts it, and tracks
// what the API server returned (nil: deleted) until the informer has it.
func (a *exportAges) writeOne(verb string, cm *corev1.ConfigMap, write func() (*corev1.ConfigMap, error)) error {
	got, err := write()
	if verb == "delete" && apierrors.IsNotFound(err) {
		err = nil
	}
	k := trackKey{cluster: "hub", kind: "ConfigMap", namespace: cm.Namespace, name: cm.Name}
	namespace, name, _ := agesService(cm.Name)
	return hubWrote(a.track, k, cm, nilIfNone(got), namespace+"/"+name, verb, "ConfigMap "+key(cm)+", the ages of the service's exports", err)
}

// ageMembers sets each member's FirstSeen in the sync's input.
func (a *exportAges) ageMembers(in *desired.Input) {
	seen := a.firstSeenOf(in.Namespace, in.Name)
	inherit := a.inheritor(seen)
	for cluster, m := range in.Members {
		t, ok := seen[cluster]
		if !ok {
			t, ok = inherit(cluster)
		}
		if ok {
			m.FirstSeen = t
			in.Members[cluster] = m
		}
	}
}

// inheritor tells the age a member without one of its own has in seen:
// that of the name it had before a rename (rename.go), as its export is
// the same one; the renames are read once, at the first question.
func (a *exportAges) inheritor(seen map[string]time.Time) func(cluster string) (time.Time, bool) {
	var renames map[string]string
	return func(cluster string) (time.Time, bool) {
		if len(seen) == 0 {
			return time.Time{}, false
		}
		if renames == nil {
			renames = a.renames()
		}
		t, ok := seen[renames[cluster]]
		return t, ok
	}
}

// forget drops what this run noted: after the shards held change,
// another replica may have aged the services since.
func (a *exportAges) forget() {
	a.perService.each(func(s *serviceState) { s.firstSeen = nil })
}
