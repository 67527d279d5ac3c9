package process

import (
	"maps"
	"os"
	"path/filepath"
	"testing"
)

// Only the kB fields that parse, in bytes.
func TestStatusKB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status")
	status := "Name:\tcoredns-mcs\nVmHWM:\t   51200 kB\nVmRSS:\t   40960 kB\nVmLck:\t  many kB\nThreads:\t9\n"
	if err := os.WriteFile(path, []byte(status), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := StatusKB(path)
	if want := map[string]int64{"VmHWM": 50 << 20, "VmRSS": 40 << 20}; err != nil || !maps.Equal(got, want) {
		t.Errorf("%v, %v; want %v", got, err, want)
	}
	if _, err := StatusKB(filepath.Join(t.TempDir(), "gone")); err == nil {
		t.Error("a file that is not there: no error")
	}
}
