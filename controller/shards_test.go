package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
	"github.com/coredns-mcs/coredns-mcs/controller/shards"
)

// A replica holding shard 0 of 2 syncs only shard 0's services, and its
// informers do not even list what was written for shard 1's. Once it
// takes shard 1 over, it lists those too, and its first sync over the
// unchanged world writes nothing.
func TestShardsSplitServices(t *testing.T) {
	mine, theirs := nameOfShard(0, 2), nameOfShard(1, 2)
	w := world{hub: {}, m1: {}}
	for _, name := range []string{mine, theirs} {
		w[hub] = append(w[hub], multiClusterService(name, api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, false))
		w[m1] = append(w[m1], service(name, false, t0), slice(name, name+"-1", 1, "10.1.0.1"))
	}
	both := shards.NewSet(2)
	both.Want(0)
	both.Want(1)
	both.Hold()
	f := newFixture(t, w, withOptions(Options{Shards: both}))
	for _, name := range []string{mine, theirs} {
		expect(t, "one replica", f.sync("demo/"+name), writes{
			hub: {"patch multiclusterservices demo/" + name, "update multiclusterservices/status demo/" + name},
			m2:  append(namespaceOnce(name == mine), firstImport(name, "imported-member1-"+name+"-1")...),
		})
	}

	set := shards.NewSet(2)
	set.Want(0)
	set.Hold()
	f.opts.Shards = set
	f.restart()
	m := f.member(m2)
	if m.Import(ns, mine) == nil || m.Import(ns, theirs) != nil || m.Service(ns, api.DerivedPrefix+theirs) != nil || len(m.ImportedSlices(ns, theirs)) > 0 {
		t.Errorf("holding shard 0, member2's caches have %s's import %t, %s's import %t, derived Service %t and %d imported slices; want only %s's",
			mine, m.Import(ns, mine) != nil, theirs, m.Import(ns, theirs) != nil, m.Service(ns, api.DerivedPrefix+theirs) != nil, len(m.ImportedSlices(ns, theirs)), mine)
	}
	if got := drain(f.c); len(got) != 1 || got[0] != "demo/"+mine {
		t.Errorf("queued %v, want demo/%s alone", got, mine)
	}
	f.c.enqueue(ns, theirs)
	if got := drain(f.c); len(got) != 0 {
		t.Errorf("queued %v after a change of %s, want nothing", got, theirs)
	}

	set.Want(1)
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return f.reg.Selected(set.Selector()), nil
	})
	if err != nil {
		t.Fatal("the members were never listed afresh for shards 0 and 1")
	}
	set.Hold()
	if m := f.member(m2); m.Import(ns, theirs) == nil {
		t.Errorf("holding shard 1 too, member2's caches have no import of %s", theirs)
	}
	f.c.Resync()
	if got := drain(f.c); len(got) != 2 {
		t.Errorf("queued %v after taking shard 1, want both services", got)
	}
	expect(t, "taken over", f.sync("demo/"+theirs), writes{})
}

// What the controller wrote before it labelled buckets gets its bucket by
// one update of each object, and then nothing more is written.
func TestBucketAddedToOlderObjects(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, false)},
		m1:  {service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
	})
	f.sync("demo/foo")
	imp, derived, imported := f.importOf(m2, "foo"), f.serviceOf(m2, "derived-foo"), f.sliceOf(m2, "imported-member1-foo-1")
	for _, o := range []metav1.Object{imp, derived, imported} {
		if o.GetLabels()[api.LabelBucket] != shards.Label(ns, "foo") {
			t.Errorf("%s has labels %v, want its bucket %s", o.GetName(), o.GetLabels(), shards.Label(ns, "foo"))
		}
		delete(o.GetLabels(), api.LabelBucket)
	}
	f.change(m2, imp, "update")
	f.change(m2, derived, "update")
	f.change(m2, imported, "update")
	// The fakes count every ServiceImport update as a change of its spec,
	// so its Ready condition follows the new generation; an API server
	// leaves the generation of a change of labels, and that write is not
	// made there.
	expect(t, "objects without a bucket", f.sync("demo/foo"), writes{
		m2: {"update services demo/derived-foo", "update serviceimports demo/foo", "update serviceimports/status demo/foo", "update endpointslices demo/imported-member1-foo-1"},
	})
	expect(t, "again", f.sync("demo/foo"), writes{})
}

// nameOfShard is the first name svc-<i> of a service of shard of n.
func nameOfShard(shard, n int) string {
	for i := 0; ; i++ {
		if name := fmt.Sprintf("svc-%d", i); shards.Bucket(ns, name)%n == shard {
			return name
		}
	}
}

// namespaceOnce is the namespace's creation in member2, by the first sync.
func namespaceOnce(first bool) []string {
	if first {
		return []string{"create namespaces demo"}
	}
	return nil
}

// drain takes every key from the queue, in order.
func drain(c *Controller) []string {
	var out []string
	for c.queue.Len() > 0 {
		k, _ := c.queue.Get()
		c.queue.Done(k)
		c.queue.Forget(k)
		out = append(out, k)
	}
	return out
}
