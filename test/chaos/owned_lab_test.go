//go:build lab

package chaos

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/coredns-mcs/coredns-mcs/test/labtest"
)

// auditLogs copies the lab's audit logs into the run's directory, dir/audit,
// and reads them there: the owned invariant's input, which recheck reads
// again (the lab's own are gone with its next start).
func auditLogs(t *testing.T, l *labtest.Lab, clusters []string, dir string) map[string][]auditv1.Event {
	out := filepath.Join(dir, "audit")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range clusters {
		paths, err := l.AuditLogs(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range paths {
			if err := copyFile(p, filepath.Join(out, filepath.Base(p))); err != nil {
				t.Fatal(err)
			}
		}
	}
	logs, err := ReadAudit(out)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
