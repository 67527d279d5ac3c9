package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/members"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// hubState is what the controller keeps in its namespace on the hub: the
// member Secrets, the Events of those it refused, and the Leases its
// replicas lead by.
type hubState struct {
	namespace string
	secrets   []corev1.Secret
	refusals  []corev1.Event // Warning MemberRefused on a Secret
	leases    []coordinationv1.Lease
	unread    map[string]error // reads that failed (forbidden, say), by what they read
}

// readHub reads the controller's namespace; what cannot be read makes its
// check unknown.
func readHub(ctx context.Context, kube kubernetes.Interface, ns string) *hubState {
	h := &hubState{namespace: ns, unread: map[string]error{}}
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: api.LabelCluster})
	if err != nil {
		h.unread["secrets"] = err
	} else {
		h.secrets = secrets.Items
	}
	events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + members.EventRefused + ",involvedObject.kind=Secret"})
	if err != nil {
		h.unread["events"] = err
	} else {
		h.refusals = events.Items
	}
	leases, err := kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		h.unread["leases"] = err
	} else {
		h.leases = leases.Items
	}
	return h
}

// refusedCheck: no member Secret is refused, as the controller's Events
// say. An Event counts only while it is about the Secret as it is now (its
// UID and resourceVersion): a Secret changed since is decided again, and
// refused again with a new Event if it still is.
func refusedCheck(h *hubState) Check {
	name := "no member Secret in " + h.namespace + " is refused"
	for _, what := range []string{"secrets", "events"} {
		if err := h.unread[what]; err != nil {
			return unknown(linkHub, "", name, what+" in "+h.namespace+": "+err.Error(), "")
		}
	}
	var problems []string
	for _, s := range h.secrets {
		if e := lastRefusal(h.refusals, &s); e != nil {
			problems = append(problems, fmt.Sprintf("Secret %s/%s (cluster %s): %s", s.Namespace, s.Name, s.Labels[api.LabelCluster], e.Message))
		}
	}
	if len(problems) == 0 {
		return pass(linkHub, "", name)
	}
	return fail(linkHub, "", name, strings.Join(problems, "; "),
		"the message names the field and the fix (docs/troubleshooting.md, \"A member is refused\"); kubectl mcs join CLUSTER --context CONTEXT writes a usable Secret")
}

// lastRefusal is the latest MemberRefused Event of s as it is now, or nil.
func lastRefusal(events []corev1.Event, s *corev1.Secret) *corev1.Event {
	var last *corev1.Event
	for i := range events {
		e := &events[i]
		o := e.InvolvedObject
		if e.Type != corev1.EventTypeWarning || e.Reason != members.EventRefused || o.Kind != "Secret" ||
			o.Name != s.Name || o.UID != s.UID || o.ResourceVersion != s.ResourceVersion {
			continue
		}
		if last == nil || eventTime(e).After(eventTime(last)) {
			last = e
		}
	}
	return last
}

func eventTime(e *corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.LastTimestamp.Time
}

// leaderCheck: a replica leads each shard, holding its Lease
// (shards.LeaseName) and renewing it within its duration. The shard count
// is that of the Lease renewed last: after a change of --shards the old
// count's Leases linger, released.
func leaderCheck(h *hubState, now time.Time) Check {
	name := "a replica of mcs-controller leads (Lease " + h.namespace + "/" + shards.LeaseName(0, 1) + ", or one per shard)"
	fix := "kubectl --context <hub> -n " + h.namespace + " get pods -l app.kubernetes.io/name=mcs-controller; their logs (--prefix) say why none leads: the hub's API server, or their RBAC on leases (docs/troubleshooting.md, \"No replica leads\")"
	if err := h.unread["leases"]; err != nil {
		return unknown(linkHub, "", name, "leases in "+h.namespace+": "+err.Error(), "")
	}
	byName := map[string]*coordinationv1.Lease{}
	var latest *coordinationv1.Lease
	for i := range h.leases {
		l := &h.leases[i]
		if l.Name != shards.LeaseName(0, 1) && !strings.HasPrefix(l.Name, shards.LeaseName(0, 1)+"-shard-") { // not a leader's
			continue
		}
		byName[l.Name] = l
		if latest == nil || renewed(l).After(renewed(latest)) {
			latest = l
		}
	}
	if latest == nil {
		return fail(linkHub, "", name, "there is no such Lease in "+h.namespace+": no replica has led (with --leader-elect=false none is written: then see that one replica runs)", fix)
	}
	n := 1
	if latest.Name != shards.LeaseName(0, 1) {
		n, _ = strconv.Atoi(latest.Labels[shards.LabelShards])
	}
	var problems []string
	for i := range max(n, 1) {
		lease := shards.LeaseName(i, n)
		if n < 1 { // a count this Lease does not say: judge it alone
			lease = latest.Name
		}
		if p := leaseProblem(byName[lease], lease, now); p != "" {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return fail(linkHub, "", name, strings.Join(problems, "; "), fix)
	}
	return pass(linkHub, "", fmt.Sprintf("%s: %d of %d held and fresh", name, max(n, 1), max(n, 1)))
}

// leaseProblem says why l, a leader's Lease, is not held; "" when it is.
func leaseProblem(l *coordinationv1.Lease, name string, now time.Time) string {
	switch {
	case l == nil:
		return "no Lease " + name + ": nobody leads its shard"
	case ptr.Deref(l.Spec.HolderIdentity, "") == "":
		return "Lease " + name + " is released: nobody leads"
	case l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil:
		return "Lease " + name + " has no renewTime or duration"
	}
	age := now.Sub(l.Spec.RenewTime.Time).Round(time.Second)
	if age > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
		return fmt.Sprintf("Lease %s, held by %s, was renewed %s ago, past its %d s: its holder is gone or cannot write it", name, *l.Spec.HolderIdentity, age, *l.Spec.LeaseDurationSeconds)
	}
	return ""
}

func renewed(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// hubChecks are the controller's own: a replica leads, no member Secret is
// refused.
func hubChecks(w *world, now time.Time) []Check {
	if w.hub == nil {
		return nil
	}
	return []Check{leaderCheck(w.hub, now), refusedCheck(w.hub)}
}
