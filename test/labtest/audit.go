package labtest

import "path/filepath"

// Audit, set to 1 in a test binary's environment before Main starts the
// lab, has the lab keep its API servers' audit logs (test/lab/README.md,
// "Audit logs"), whatever LAB_AUDIT the caller's environment held: labctl
// up reads it, and keeps them by default. A lab already running keeps
// what it was started with.
const Audit = "LAB_AUDIT"

// AuditLogs are the paths of cluster's API server audit logs, the current
// one and any rotated; none when the lab runs without them.
func (l *Lab) AuditLogs(cluster string) ([]string, error) {
	return filepath.Glob(l.out("lab", "logs", cluster+"-audit*.log"))
}
