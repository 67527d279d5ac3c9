package main

import (
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"sigs.k8s.io/yaml"
)

// auditEnv, set to 0 in labctl up's environment, turns off the API
// servers' audit logs: every write, one JSON line each, in
// logs/<cluster>-audit.log. On by default: the chaos run reads them, and a
// lab that make demo left running is the one make test's chaos run finds.
const auditEnv = "LAB_AUDIT"

// auditPolicyPath holds the policy while the lab has audit logs: its
// presence is what says so, so that an API server labctl start restarts
// logs as it did, whatever that labctl's environment holds.
func (l *lab) auditPolicyPath() string { return filepath.Join(l.dir, "audit-policy.yaml") }

func (l *lab) auditLogPath(c cluster) string {
	return filepath.Join(l.dir, "logs", c.name+"-audit.log")
}

func (l *lab) audited() bool {
	_, err := os.Stat(l.auditPolicyPath())
	return err == nil
}

// writeAuditPolicy writes the policy unless labctl up's environment
// turns audit logs off.
func (l *lab) writeAuditPolicy() error {
	switch v := os.Getenv(auditEnv); v {
	case "0":
		return nil
	case "", "1":
	default:
		return fmt.Errorf("%s=%q: want 1 (audit logs) or 0", auditEnv, v)
	}
	b, err := yaml.Marshal(auditPolicy())
	if err != nil {
		return err
	}
	return os.WriteFile(l.auditPolicyPath(), b, 0o644)
}

// auditPolicy logs who wrote what, without bodies: every create, update,
// patch and delete at Metadata level, once its response is complete. Left
// out: reads, and the writes that come on a clock whatever changes (Leases,
// Events), which would be most of the lines; and the access reviews,
// objects no one keeps.
func auditPolicy() *auditv1.Policy {
	return &auditv1.Policy{
		TypeMeta:   metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Policy"},
		OmitStages: []auditv1.Stage{auditv1.StageRequestReceived},
		Rules: []auditv1.PolicyRule{
			{Level: auditv1.LevelNone, Resources: []auditv1.GroupResources{
				{Group: "coordination.k8s.io", Resources: []string{"leases"}},
				{Group: "", Resources: []string{"events"}},
				{Group: "events.k8s.io", Resources: []string{"events"}},
				{Group: "authentication.k8s.io"},
				{Group: "authorization.k8s.io"},
			}},
			{Level: auditv1.LevelMetadata, Verbs: []string{"create", "update", "patch", "delete", "deletecollection"}},
			// No rule matched: not logged.
		},
	}
}

// auditArgs are the API server's audit flags when the lab has audit logs.
// The log backend writes each line in the request's own handler as it
// completes (blocking mode, the default), not from a buffer a stop would
// lose; past 1 GiB a log is rotated to <cluster>-audit-<time>.log, and one
// rotated log is kept, so that a lab the scale benchmarks write into for
// long holds at most 2 GiB of them a cluster.
func (l *lab) auditArgs(c cluster) []string {
	if !l.audited() {
		return nil
	}
	return []string{
		"--audit-policy-file=" + l.auditPolicyPath(),
		"--audit-log-path=" + l.auditLogPath(c),
		"--audit-log-format=json",
		"--audit-log-maxsize=1024",
		"--audit-log-maxbackup=1",
	}
}
