package docs_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var (
	spaces      = regexp.MustCompile(`[ \t]+`)
	placeholder = regexp.MustCompile(`<[^<>\s][^<>]*>`)
)

// lines splits text into its non-empty lines, runs of spaces made one.
func lines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(spaces.ReplaceAllString(l, " ")); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// matchOutput says how got differs from want, line by line, where each
// <name> of want stands for one word and the same name for the same word.
func matchOutput(want, got string) error {
	w, g := lines(want), lines(got)
	if len(w) != len(g) {
		return fmt.Errorf("%d lines, want %d:\n%s", len(g), len(w), got)
	}
	bound := map[string]string{}
	for i := range w {
		names := placeholder.FindAllString(w[i], -1)
		parts := placeholder.Split(w[i], -1)
		var re strings.Builder
		re.WriteString("^")
		for j, p := range parts {
			re.WriteString(regexp.QuoteMeta(p))
			if j < len(names) {
				re.WriteString(`(\S+)`)
			}
		}
		re.WriteString("$")
		m := regexp.MustCompile(re.String()).FindStringSubmatch(g[i])
		if m == nil {
			return fmt.Errorf("line %d is %q, want %q; whole output:\n%s", i+1, g[i], w[i], got)
		}
		for j, name := range names {
			if v, ok := bound[name]; ok && v != m[j+1] {
				return fmt.Errorf("line %d: %s is %q here and %q above; whole output:\n%s", i+1, name, m[j+1], v, got)
			}
			bound[name] = m[j+1]
		}
	}
	return nil
}

func TestMatchOutput(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{"a  b\n", "a b\n\n", true},
		{"NAME   TYPE\nderived-serve ClusterIP <ip>\n", "NAME TYPE\nderived-serve   ClusterIP   10.13.0.7\n", true},
		{"<vip>\n<vip>\n", "10.13.0.7\n10.13.0.7\n", true},
		{"<vip>\n<vip>\n", "10.13.0.7\n10.13.0.8\n", false},
		{"<a> <b>\n", "x y\n", true},
		{"<a>\n", "x y\n", false},
		{"ServiceApplied=True Applied\n", "ServiceApplied=False ApplyFailed\n", false},
		{"one\n", "one\ntwo\n", false},
		{"x.y (a+b)\n", "x.y (a+b)\n", true},
	} {
		if err := matchOutput(c.want, c.got); (err == nil) != c.ok {
			t.Errorf("matchOutput(%q, %q) = %v, want ok %v", c.want, c.got, err, c.ok)
		}
	}
}
