package benchreport

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSave(t *testing.T) {
	var out bytes.Buffer
	path := filepath.Join(t.TempDir(), "r.md")
	if err := Save(&out, path, "# r\n"); err != nil {
		t.Fatal(err)
	}
	saved, err := os.ReadFile(path)
	if err != nil || string(saved) != "# r\n" || out.String() != "# r\n" {
		t.Errorf("saved %q (%v), printed %q; want both %q", saved, err, out.String(), "# r\n")
	}
}

func TestAbs(t *testing.T) {
	a, b := "bin/x", "/already/abs"
	if err := Abs(&a, &b); err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if a != filepath.Join(wd, "bin/x") || b != "/already/abs" {
		t.Errorf("Abs = %q, %q", a, b)
	}
}

// Finish makes the report once the run's length is known.
func TestFinish(t *testing.T) {
	r := Run{Started: time.Now().Add(-time.Minute)}
	var out bytes.Buffer
	report := func() string { return "took " + r.Elapsed.Round(time.Minute).String() }
	if err := r.Finish(&out, filepath.Join(t.TempDir(), "r.md"), report); err != nil {
		t.Fatal(err)
	}
	if out.String() != "took 1m0s" {
		t.Errorf("report %q, want %q", out.String(), "took 1m0s")
	}
}
