package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// A MultiClusterService's conditions are exported as the hub holds them,
// so that one that stays not Ready fires an alert: here one whose spec
// names an unknown cluster, then fixed.
func TestConditionsExported(t *testing.T) {
	f := newFixture(t, world{
		hub: {multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{"member22"}, true)},
		m1:  {ns1(), service("foo", false, t0), slice("foo", "foo-1", 1, "10.1.0.1")},
		m2:  {ns1()},
	})
	cc := &conditionCollector{}
	cc.hub.Store(&f.c.hub)
	exported := func(want string) {
		t.Helper()
		header := "# HELP mcs_multiclusterservice_condition 1 for each condition of each MultiClusterService on the hub, by its type, status and reason, as the hub holds them; absent until the controller has listed them.\n# TYPE mcs_multiclusterservice_condition gauge\n"
		var last error
		// The informer delivers the status the sync wrote a moment later.
		err := wait.PollUntilContextTimeout(t.Context(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			last = testutil.CollectAndCompare(cc, strings.NewReader(header+want), "mcs_multiclusterservice_condition")
			return last == nil, nil
		})
		if err != nil {
			t.Fatalf("conditions exported: %v", last)
		}
	}

	f.sync("demo/foo")
	exported(`mcs_multiclusterservice_condition{mcsvc_name="foo",mcsvc_namespace="demo",reason="InvalidSpec",status="False",type="EndpointSliceApplied"} 1
mcs_multiclusterservice_condition{mcsvc_name="foo",mcsvc_namespace="demo",reason="InvalidSpec",status="False",type="EndpointSliceCollected"} 1
mcs_multiclusterservice_condition{mcsvc_name="foo",mcsvc_namespace="demo",reason="InvalidSpec",status="False",type="ServiceApplied"} 1
`)
	f.change(hub, multiClusterService("foo", api.RemoteAndLocal, []v1alpha1.ClusterName{m1}, []v1alpha1.ClusterName{m2}, true), "update")
	f.sync("demo/foo")
	exported(`mcs_multiclusterservice_condition{mcsvc_name="foo",mcsvc_namespace="demo",reason="Applied",status="True",type="EndpointSliceApplied"} 1
mcs_multiclusterservice_condition{mcsvc_name="foo",mcsvc_namespace="demo",reason="Collected",status="True",type="EndpointSliceCollected"} 1
mcs_multiclusterservice_condition{mcsvc_name="foo",mcsvc_namespace="demo",reason="NoHubService",status="True",type="ServiceApplied"} 1
`)
	f.change(hub, f.mcsOf("foo"), "delete")
	exported("")
}
