package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"
)

var crdResource = schema.GroupVersionResource{
	Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions",
}

// clients talk to one cluster of the lab.
type clients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
}

func newClients(creds credentials, c cluster) (*clients, error) {
	cfg := restConfig(creds, c)
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.name, err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", c.name, err)
	}
	return &clients{kube: kube, dynamic: dyn}, nil
}

// createObjects creates what the lab provides on top of a bare control
// plane: the fake node, the mcs-system namespace, and in members the
// ServiceExport and ServiceImport CRDs.
func (cl *clients) createObjects(ctx context.Context, c cluster) error {
	if err := cl.createNode(ctx, c); err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mcsNamespace}}
	if _, err := cl.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating namespace %s: %w", mcsNamespace, err)
	}
	if !c.member {
		return nil
	}
	for _, doc := range [][]byte{mcscrd.ServiceExportCRD, mcscrd.ServiceImportCRD} {
		if err := cl.createCRD(ctx, doc); err != nil {
			return err
		}
	}
	return nil
}

// createNode creates the node kwok plays. Its pod CIDR is the cluster's, so
// kwok gives pods addresses from it; it has no taint, so pods need no
// toleration to be scheduled.
func (cl *clients) createNode(ctx context.Context, c cluster) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nodeName,
			Annotations: map[string]string{kwokNodeAnnotation: "fake"},
			Labels: map[string]string{
				"type":                   "kwok",
				"kubernetes.io/hostname": nodeName,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: c.podCIDR, PodCIDRs: []string{c.podCIDR}},
	}
	if _, err := cl.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); ignoreExists(err) != nil {
		return fmt.Errorf("creating node %s: %w", nodeName, err)
	}
	return nil
}

func (cl *clients) createCRD(ctx context.Context, doc []byte) error {
	crd := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &crd.Object); err != nil {
		return fmt.Errorf("decoding an mcs-api CRD: %w", err)
	}
	_, err := cl.dynamic.Resource(crdResource).Create(ctx, crd, metav1.CreateOptions{})
	if ignoreExists(err) != nil {
		return fmt.Errorf("creating CRD %s: %w", crd.GetName(), err)
	}
	return nil
}

// apiserverReady fails until the apiserver's /readyz passes.
func (cl *clients) apiserverReady(ctx context.Context) error {
	return cl.kube.Discovery().RESTClient().Get().AbsPath("/readyz").Do(ctx).Error()
}

// crdsEstablished fails until every CRD of the cluster is Established.
func (cl *clients) crdsEstablished(ctx context.Context) error {
	list, err := cl.dynamic.Resource(crdResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, crd := range list.Items {
		if !hasCondition(crd.Object, "Established") {
			return fmt.Errorf("CRD %s is not Established yet", crd.GetName())
		}
	}
	return nil
}

// nodeReady fails until kwok has made the fake node Ready.
func (cl *clients) nodeReady(ctx context.Context) error {
	node, err := cl.kube.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
			return nil
		}
	}
	return fmt.Errorf("node %s is not Ready yet", nodeName)
}

func hasCondition(obj map[string]any, typ string) bool {
	conds, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == typ && m["status"] == "True" {
			return true
		}
	}
	return false
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
