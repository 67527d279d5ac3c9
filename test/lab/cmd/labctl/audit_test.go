package main

import (
	"slices"
	"testing"

	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// By default (and with LAB_AUDIT=1), labctl up's API servers log every write as kube-apiserver
// reads the policy: a write at Metadata level once complete, and nothing of
// reads, Leases or Events. The policy file outlives labctl up's
// environment, so an API server started again logs as before.
func TestAuditPolicyLogsWrites(t *testing.T) {
	t.Setenv(auditEnv, "")
	l := newTestLab(t)
	if _, err := l.prepare(); err != nil {
		t.Fatal(err)
	}
	t.Setenv(auditEnv, "0")
	hub := clusterNamed(t, "hub")
	args := apiserverArgs(l, hub)
	for _, want := range []string{"--audit-policy-file=" + l.auditPolicyPath(), "--audit-log-path=" + l.auditLogPath(hub)} {
		if !slices.Contains(args, want) {
			t.Errorf("kube-apiserver's arguments lack %s: %v", want, args)
		}
	}
	p, err := policy.LoadPolicyFromFile(l.auditPolicyPath())
	if err != nil {
		t.Fatal(err)
	}
	eval := policy.NewPolicyRuleEvaluator(p)
	for _, tc := range []struct {
		verb, group, resource, subresource string
		want                               auditinternal.Level
	}{
		{"patch", "discovery.k8s.io", "endpointslices", "", auditinternal.LevelMetadata},
		{"update", "multicluster.x-k8s.io", "serviceexports", "status", auditinternal.LevelMetadata},
		{"create", "", "services", "", auditinternal.LevelMetadata},
		{"delete", "multicluster.x-k8s.io", "serviceimports", "", auditinternal.LevelMetadata},
		{"deletecollection", "discovery.k8s.io", "endpointslices", "", auditinternal.LevelMetadata},
		{"get", "", "services", "", auditinternal.LevelNone},
		{"watch", "discovery.k8s.io", "endpointslices", "", auditinternal.LevelNone},
		{"update", "coordination.k8s.io", "leases", "", auditinternal.LevelNone},
		{"create", "", "events", "", auditinternal.LevelNone},
		{"create", "authorization.k8s.io", "subjectaccessreviews", "", auditinternal.LevelNone},
	} {
		cfg := eval.EvaluatePolicyRule(authorizer.AttributesRecord{Verb: tc.verb, APIGroup: tc.group, Resource: tc.resource,
			Subresource: tc.subresource, Namespace: "ns", Name: "x", ResourceRequest: true})
		if cfg.Level != tc.want {
			t.Errorf("%s %s/%s/%s: level %s, want %s", tc.verb, tc.group, tc.resource, tc.subresource, cfg.Level, tc.want)
		}
		if tc.want != auditinternal.LevelNone && !slices.Contains(cfg.OmitStages, auditinternal.StageRequestReceived) {
			t.Errorf("%s %s: logged at RequestReceived too (omit stages %v): two lines a request", tc.verb, tc.resource, cfg.OmitStages)
		}
	}
}

// LAB_AUDIT=0 turns the audit logs off, and a value LAB_AUDIT does not
// know is refused with its name.
func TestAuditOff(t *testing.T) {
	t.Setenv(auditEnv, "0")
	l := newTestLab(t)
	if _, err := l.prepare(); err != nil {
		t.Fatal(err)
	}
	if l.audited() || len(l.auditArgs(clusterNamed(t, "member1"))) > 0 {
		t.Fatalf("audit logs on with %s=0", auditEnv)
	}
	t.Setenv(auditEnv, "yes")
	if _, err := newTestLab(t).prepare(); err == nil {
		t.Fatalf("%s=yes accepted", auditEnv)
	}
}
