package members

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api/mcsapi"
)

// The controller writes ServiceImports and ServiceExport status in v1beta1
// types; these write them in the version the member serves.

// ImportClient writes a member's ServiceImports of one namespace.
type ImportClient struct {
	m         *Member
	namespace string
}

// ServiceImports writes the member's ServiceImports in namespace.
func (m *Member) ServiceImports(namespace string) ImportClient {
	return ImportClient{m: m, namespace: namespace}
}

func (c ImportClient) alpha() bool {
	c.m.mu.RLock()
	defer c.m.mu.RUnlock()
	return mcsapi.IsAlpha(c.m.imports)
}

// Create creates imp.
func (c ImportClient) Create(ctx context.Context, imp *mcsv1b1.ServiceImport) (*mcsv1b1.ServiceImport, error) {
	if c.alpha() {
		got, err := c.m.MCS.MulticlusterV1alpha1().ServiceImports(c.namespace).Create(ctx, mcsapi.ImportToAlpha(imp), metav1.CreateOptions{})
		return mcsapi.ImportToBeta(got), err
	}
	return c.m.MCS.MulticlusterV1beta1().ServiceImports(c.namespace).Create(ctx, imp, metav1.CreateOptions{})
}

// Get reads the ServiceImport name from the member's API server.
func (c ImportClient) Get(ctx context.Context, name string, opts metav1.GetOptions) (*mcsv1b1.ServiceImport, error) {
	if c.alpha() {
		got, err := c.m.MCS.MulticlusterV1alpha1().ServiceImports(c.namespace).Get(ctx, name, opts)
		return mcsapi.ImportToBeta(got), err
	}
	return c.m.MCS.MulticlusterV1beta1().ServiceImports(c.namespace).Get(ctx, name, opts)
}

// Update updates imp's metadata and spec.
func (c ImportClient) Update(ctx context.Context, imp *mcsv1b1.ServiceImport) (*mcsv1b1.ServiceImport, error) {
	if c.alpha() {
		got, err := c.m.MCS.MulticlusterV1alpha1().ServiceImports(c.namespace).Update(ctx, mcsapi.ImportToAlpha(imp), metav1.UpdateOptions{})
		return mcsapi.ImportToBeta(got), err
	}
	return c.m.MCS.MulticlusterV1beta1().ServiceImports(c.namespace).Update(ctx, imp, metav1.UpdateOptions{})
}

// UpdateStatus updates imp's status.
func (c ImportClient) UpdateStatus(ctx context.Context, imp *mcsv1b1.ServiceImport) (*mcsv1b1.ServiceImport, error) {
	if c.alpha() {
		got, err := c.m.MCS.MulticlusterV1alpha1().ServiceImports(c.namespace).UpdateStatus(ctx, mcsapi.ImportToAlpha(imp), metav1.UpdateOptions{})
		return mcsapi.ImportToBeta(got), err
	}
	return c.m.MCS.MulticlusterV1beta1().ServiceImports(c.namespace).UpdateStatus(ctx, imp, metav1.UpdateOptions{})
}

// Delete deletes the ServiceImport name.
func (c ImportClient) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	if c.alpha() {
		return c.m.MCS.MulticlusterV1alpha1().ServiceImports(c.namespace).Delete(ctx, name, opts)
	}
	return c.m.MCS.MulticlusterV1beta1().ServiceImports(c.namespace).Delete(ctx, name, opts)
}

// ImportVersion is the version of ServiceImport the member serves, for
// owner references.
func (m *Member) ImportVersion() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.imports.String()
}

// UpdateExportStatus updates the status of the member's ServiceExport exp,
// and returns it as the member's API server did, as a v1beta1 type.
func (m *Member) UpdateExportStatus(ctx context.Context, exp *mcsv1b1.ServiceExport) (*mcsv1b1.ServiceExport, error) {
	m.mu.RLock()
	alpha := mcsapi.IsAlpha(m.exports)
	m.mu.RUnlock()
	if alpha {
		got, err := m.MCS.MulticlusterV1alpha1().ServiceExports(exp.Namespace).UpdateStatus(ctx, mcsapi.ExportToAlpha(exp), metav1.UpdateOptions{})
		if err != nil {
			return nil, err
		}
		return mcsapi.ExportToBeta(got), nil
	}
	return m.MCS.MulticlusterV1beta1().ServiceExports(exp.Namespace).UpdateStatus(ctx, exp, metav1.UpdateOptions{})
}
