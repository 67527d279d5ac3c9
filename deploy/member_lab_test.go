//go:build lab

package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	mcsclient "sigs.k8s.io/mcs-api/pkg/client/clientset/versioned"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/deploy/member"
	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// writesOnlyItsOwn checks, with the member account's token (kubeconfig),
// that the member's API server refuses every write of the account that is
// not the controller's (an imported slice that is not as the controller
// makes it, a user's ServiceImport given the strategy, other labels or
// taken over and deleted, a Namespace, a ServiceExport's status in
// kube-system, a Lease other than source-<cluster>), and admits what the
// controller does write (a user's import filled in and its strategy taken
// back, an imported slice, a slice of its label deleted whatever it
// carries, a Lease source-<cluster>, an export's status). Writes that
// would change the world are dry runs: the policy judges them all the same.
func writesOnlyItsOwn(t *testing.T, kubeconfig, cluster, ns, apps string) {
	t.Helper()
	l := labtest.Get(t)
	ctx := t.Context()
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dryUpdate := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}
	client := clientOf(t, kubeconfig)
	mcs := mcsClientOf(t, kubeconfig)
	admin, adminMCS := l.Client(t, cluster), mcsclient.NewForConfigOrDie(l.Config(t, cluster))

	// A user's ServiceImport (the MCS API's manual import), and one with
	// the strategy (as an older controller added it; without the filled
	// mark, which would have the running controller take it back first).
	userImport := func(name string, annotations map[string]string) *mcsv1beta1.ServiceImport {
		imp := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: apps, Labels: map[string]string{"team": "shop"}, Annotations: annotations},
			Spec:       mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, Ports: []mcsv1beta1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		got, err := adminMCS.MulticlusterV1beta1().ServiceImports(apps).Create(ctx, imp, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: a user's ServiceImport %s: %v", cluster, name, err)
		}
		return got
	}
	manual := userImport("manual", nil)
	older := userImport("older", map[string]string{api.AnnotationStrategy: string(api.LocalFirst)})
	// A slice of the controller's label that it never made, as one written
	// before the policy was in force: it deletes such a slice, whatever
	// else it carries.
	orphan, err := admin.DiscoveryV1().EndpointSlices(apps).Create(ctx, importedSlice("orphan", "foo", func(s *discoveryv1.EndpointSlice) {
		delete(s.Labels, mcsv1beta1.LabelServiceName)
		delete(s.Labels, mcsv1beta1.LabelSourceCluster)
	}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A ServiceExport in kube-system, which only its status writes reach.
	kubeExport, err := adminMCS.MulticlusterV1beta1().ServiceExports("kube-system").Create(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{GenerateName: "evil-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = adminMCS.MulticlusterV1beta1().ServiceExports("kube-system").Delete(ctx, kubeExport.Name, metav1.DeleteOptions{})
	})
	withImport := func(imp *mcsv1beta1.ServiceImport, change func(*mcsv1beta1.ServiceImport)) func() error {
		return func() error {
			upd, err := mcs.MulticlusterV1beta1().ServiceImports(apps).Get(ctx, imp.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(upd)
			_, err = mcs.MulticlusterV1beta1().ServiceImports(apps).Update(ctx, upd, dryUpdate)
			return err
		}
	}
	createSlice := func(s *discoveryv1.EndpointSlice) func() error {
		return func() error {
			_, err := client.DiscoveryV1().EndpointSlices(apps).Create(ctx, s, dry)
			return err
		}
	}
	lease := func(name string, labels map[string]string) func() error {
		return func() error {
			_, err := client.CoordinationV1().Leases(api.LeaseNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, dry)
			return err
		}
	}
	ours := map[string]string{api.LabelManagedBy: api.ManagedBy}

	for what, write := range map[string]func() error{
		"(a) a slice of derived-foo without the MCS API's labels": createSlice(importedSlice("imported-evil", "foo", func(s *discoveryv1.EndpointSlice) {
			delete(s.Labels, mcsv1beta1.LabelServiceName)
			delete(s.Labels, mcsv1beta1.LabelSourceCluster)
		})),
		"(a) a slice of foo joined to another derived Service": createSlice(importedSlice("imported-evil", "foo", func(s *discoveryv1.EndpointSlice) {
			s.Labels[discoveryv1.LabelServiceName] = "derived-karmada"
		})),
		"(a) a slice not named imported-*": createSlice(importedSlice("evil", "foo", nil)),
		"(a) a slice joined to a provider Service, not named imported-p.*": createSlice(importedSlice("imported-evil", "foo", func(s *discoveryv1.EndpointSlice) {
			s.Labels[discoveryv1.LabelServiceName] = api.ProviderService("foo", "member1")
		})),
		"(a) a provider copy joined to a Service not shaped as a provider's": createSlice(importedSlice(api.ProviderSlicePrefix+"evil", "foo", func(s *discoveryv1.EndpointSlice) {
			s.Labels[discoveryv1.LabelServiceName] = "derived-0karmada"
		})),
		"(a) a slice owned by a Service": createSlice(importedSlice("imported-evil", "foo", func(s *discoveryv1.EndpointSlice) {
			s.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: "derived-foo", UID: "x"}}
		})),
		"(b) a user's import given the strategy": withImport(manual, func(i *mcsv1beta1.ServiceImport) {
			i.Annotations = map[string]string{api.AnnotationStrategy: string(api.RemoteAndLocal), api.AnnotationFilled: api.FilledStrategy}
		}),
		"(b) a user's import relabelled": withImport(manual, func(i *mcsv1beta1.ServiceImport) { i.Labels["team"] = "evil" }),
		"(c) a user's import labelled as the controller's": withImport(manual, func(i *mcsv1beta1.ServiceImport) {
			i.Labels = ours
		}),
		"(c) a user's import deleted": func() error {
			return mcs.MulticlusterV1beta1().ServiceImports(apps).Delete(ctx, manual.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
		},
		"(f) a Lease of mcs-system not named source-*": lease("evil", ours),
		"(f) a Lease source-* without the label":       lease("source-evil", nil),
		"(e) a ServiceExport's status in kube-system": func() error {
			upd := kubeExport.DeepCopy()
			upd.Status.Conditions = []metav1.Condition{{Type: "Valid", Status: metav1.ConditionFalse, Reason: "Evil", LastTransitionTime: metav1.Now()}}
			_, err := mcs.MulticlusterV1beta1().ServiceExports("kube-system").UpdateStatus(ctx, upd, dryUpdate)
			return err
		},
	} {
		if err := write(); !refused(err) {
			t.Errorf("%s: %s: %v, want refused by the admission policy", cluster, what, err)
		}
	}
	// (d) No namespace at all without kubectl mcs join --create-namespaces;
	// with it, a new one of the controller's label, never kube-*.
	namespace := func(name string, labels map[string]string) error {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, dry)
		return err
	}
	if err := namespace("com", ours); !apierrors.IsForbidden(err) || refused(err) {
		t.Errorf("%s: (d) a Namespace com: %v, want Forbidden by RBAC", cluster, err)
	}
	grantNamespaces(t, cluster, ns)
	labtest.Eventually(t, converge, func(context.Context) error { return namespace("com", ours) })
	if err := namespace("com", nil); !refused(err) {
		t.Errorf("%s: a Namespace without the label, granted: %v, want refused by the admission policy", cluster, err)
	}
	if err := namespace("kube-evil", ours); !refused(err) {
		t.Errorf("%s: a Namespace kube-evil, granted: %v, want refused by the admission policy", cluster, err)
	}

	for what, write := range map[string]func() error{
		"a user's import filled in": withImport(manual, func(i *mcsv1beta1.ServiceImport) {
			i.Spec.IPs = []string{"10.96.0.9"}
			i.Annotations = map[string]string{api.AnnotationFilled: api.FilledSpec}
		}),
		"a user's import's strategy taken back": withImport(older, func(i *mcsv1beta1.ServiceImport) {
			i.Annotations = map[string]string{api.AnnotationFilled: api.FilledSpec}
		}),
		"a user's import's status": func() error {
			upd := manual.DeepCopy()
			upd.Status.Clusters = []mcsv1beta1.ClusterStatus{{Cluster: "member2"}}
			_, err := mcs.MulticlusterV1beta1().ServiceImports(apps).UpdateStatus(ctx, upd, dryUpdate)
			return err
		},
		"an imported slice": createSlice(importedSlice("imported-member2-foo", "foo", nil)),
		"a provider Service's copy of an imported slice": createSlice(importedSlice(api.ProviderSlicePrefix+"imported-member2-foo", "foo", func(s *discoveryv1.EndpointSlice) {
			s.Labels[discoveryv1.LabelServiceName] = api.ProviderService("foo", "member2")
		})),
		"a Lease source-*": lease("source-member9", ours),
		"an export's status": func() error {
			e, err := mcs.MulticlusterV1beta1().ServiceExports(apps).Get(ctx, "bar", metav1.GetOptions{})
			if err == nil {
				_, err = mcs.MulticlusterV1beta1().ServiceExports(apps).UpdateStatus(ctx, e, dryUpdate)
			}
			return err
		},
	} {
		if err := write(); err != nil {
			t.Errorf("%s: %s: %v, want admitted", cluster, what, err)
		}
	}
	if got, err := adminMCS.MulticlusterV1beta1().ServiceImports(apps).Get(ctx, manual.Name, metav1.GetOptions{}); err != nil || !maps.Equal(got.Labels, manual.Labels) {
		t.Errorf("%s: the user's import after the refusals: %v, labels %v", cluster, err, got.GetLabels())
	}
	// The controller, running as the account, deletes the slice of its
	// label that belongs to no import it made.
	labtest.Eventually(t, converge, func(ctx context.Context) error {
		_, err := admin.DiscoveryV1().EndpointSlices(apps).Get(ctx, orphan.Name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: the slice %s/%s of the controller's label that no import made: %v, want it deleted", cluster, apps, orphan.Name, err)
		}
		return nil
	})
}

// grantNamespaces applies deploy/member's controller-namespaces.yaml in
// cluster, renamed as TestRunsUnderTheDeployedRBAC renames the rest, as
// kubectl mcs join --create-namespaces does, until the test ends.
func grantNamespaces(t *testing.T, cluster, ns string) {
	t.Helper()
	a := newApplier(t, cluster)
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(member.ControllerNamespaces), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		rename(u, ns, false)
		if err := a.apply(t.Context(), u, false); err != nil {
			t.Fatalf("%s: %v", cluster, err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if ri, err := a.resource(u); err == nil {
				_ = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{})
			}
		})
	}
}

// importedSlice is a slice of svc as the controller imports it, named
// name, with change made to it.
func importedSlice(name, svc string, change func(*discoveryv1.EndpointSlice)) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			discoveryv1.LabelManagedBy:    api.ManagedBy,
			discoveryv1.LabelServiceName:  api.DerivedPrefix + svc,
			mcsv1beta1.LabelServiceName:   svc,
			mcsv1beta1.LabelSourceCluster: "member2",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.250.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
	}
	if change != nil {
		change(s)
	}
	return s
}

// mcsClientOf is an MCS API client with the credentials of kubeconfig.
func mcsClientOf(t *testing.T, kubeconfig string) mcsclient.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return mcsclient.NewForConfigOrDie(cfg)
}
