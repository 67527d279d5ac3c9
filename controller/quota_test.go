package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// A member past --member-max-exports has its newest exports refused, and
// keeps the older ones imported; once an older one goes, the newest
// refused takes its place without anything else queueing it.
func TestTooManyExports(t *testing.T) {
	f := newFixture(t, world{
		m1: {ns1(),
			service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1"), export("foo", t0),
			service("bar", false, t0), slice("bar", "bar-1", 1, "10.1.0.2"), export("bar", t0.Add(time.Hour)),
		},
		m2: {ns1()},
	}, withMaxExports(1))
	f.sync("demo/foo")
	if f.importOf(m2, "foo") == nil {
		t.Fatal("the oldest export, within the bound, is not imported")
	}
	expect(t, "the newest export", f.sync("demo/bar"), writes{m1: {"update serviceexports/status demo/bar"}})
	exp := f.exportOf(m1, "bar")
	if c := meta.FindStatusCondition(exp.Status.Conditions, string(mcsv1b1.ServiceExportConditionValid)); c == nil || c.Reason != "TooManyExports" || !strings.Contains(c.Message, "--member-max-exports") {
		t.Errorf("bar's Valid condition %+v, want False TooManyExports naming the flag", c)
	}

	for queued(f.c, "demo/bar") {
	}
	f.change(m1, export("foo", t0), "delete")
	// The informer's handlers run after its cache has the deletion.
	err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return queued(f.c, "demo/bar"), nil
	})
	if err != nil {
		t.Fatal("bar was not queued once foo's export, older, went")
	}
	f.sync("demo/foo")
	f.sync("demo/bar")
	f.importOf(m2, "bar") // fails the test when absent
	if _, err := f.mcs[m2].MulticlusterV1beta1().ServiceImports(ns).Get(t.Context(), "foo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("foo, no longer exported, is still imported: %v", err)
	}
}
