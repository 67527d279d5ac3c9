// Package member embeds what kubectl mcs join applies to a member, so that
// it is exactly what an operator applies with this kustomization.
package member

import _ "embed"

// Namespace is mcs-system, where the member account lives and the
// controller's Leases are renewed.
//
//go:embed namespace.yaml
var Namespace []byte

// ControllerRBAC is the member account, the ServiceAccount mcs-member, and
// what it may do in a member.
//
//go:embed controller-rbac.yaml
var ControllerRBAC []byte

// ControllerAdmission is the ValidatingAdmissionPolicy that bounds what the
// ServiceAccount mcs-member may write in a member, and its binding.
//
//go:embed controller-admission.yaml
var ControllerAdmission []byte

// ControllerNamespaces lets mcs-member create namespaces: applied only
// when asked (kubectl mcs join --create-namespaces).
//
//go:embed controller-namespaces.yaml
var ControllerNamespaces []byte
