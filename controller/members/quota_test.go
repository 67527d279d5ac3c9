package members

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each change of a member's exports tells which other export it moved
// across the bound of 2, so that its service is synced again.
func TestExportQuotaMoves(t *testing.T) {
	at := func(m int) metav1.Time { return metav1.NewTime(time.Unix(0, 0).Add(time.Duration(m) * time.Minute)) }
	q := &exportQuota{max: 2, made: map[string]metav1.Time{}}
	for _, step := range []struct {
		name  string
		key   string
		made  int
		gone  bool
		moved string
		over  []string // past the bound after the step
	}{
		{"within the bound", "ns/a", 1, false, "", nil},
		{"at the bound", "ns/b", 2, false, "", nil},
		{"a newest past it", "ns/c", 3, false, "", []string{"ns/c"}},
		{"a newer still", "ns/d", 4, false, "", []string{"ns/c", "ns/d"}},
		{"one claiming to be older pushes the newest used out", "ns/e", 0, false, "ns/b", []string{"ns/b", "ns/c", "ns/d"}},
		{"a used one deleted lets the oldest refused in", "ns/a", 1, true, "ns/b", []string{"ns/c", "ns/d"}},
		{"a refused one deleted moves nothing", "ns/c", 3, true, "", []string{"ns/d"}},
		{"back within the bound", "ns/e", 0, true, "ns/d", nil},
	} {
		if got := q.set(step.key, at(step.made), step.gone); got != step.moved {
			t.Errorf("%s: moved %q, want %q", step.name, got, step.moved)
		}
		var over []string
		for _, k := range []string{"ns/a", "ns/b", "ns/c", "ns/d", "ns/e"} {
			if q.over(k) {
				over = append(over, k)
			}
		}
		if !slices.Equal(over, step.over) || q.refused() != len(step.over) {
			t.Errorf("%s: past the bound %v (%d refused), want %v", step.name, over, q.refused(), step.over)
		}
	}
}
