//go:build lab

package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// report is what the suite writes into report.yaml: its specs grouped by
// Required and Optional.
type report struct {
	Groups []struct {
		Name  string
		Tests []spec
	}
	SuiteFailure  string
	Passed, Total int

	// failure is ginkgo's failure of each spec that failed, by its text.
	failure map[string]string
}

type spec struct {
	Desc       string
	Labels     []string
	Passed     bool
	Failed     bool
	Skipped    bool
	Conformant bool
	Message    string
}

// readResults reads the report the suite left in dir, and the full
// failure of each failed spec from ginkgo's report beside it: the suite's
// own message keeps only its first line (often just "Command output").
func readResults(dir string) (*report, error) {
	b, err := os.ReadFile(filepath.Join(dir, suiteReport))
	if err != nil {
		return nil, err
	}
	var r report
	if err := yaml.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", suiteReport, err)
	}
	r.failure = map[string]string{}
	b, err = os.ReadFile(filepath.Join(dir, ginkgoReport))
	if err != nil {
		return &r, nil // the names and the suite's messages are enough
	}
	var suites []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			State                   string
			Failure                 struct {
				Message  string
				Location struct {
					FileName   string
					LineNumber int
				}
			}
		}
	}
	if err := json.Unmarshal(b, &suites); err != nil {
		return nil, fmt.Errorf("%s: %w", ginkgoReport, err)
	}
	for _, s := range suites {
		for _, sr := range s.SpecReports {
			if sr.Failure.Message == "" {
				continue
			}
			// ginkgo's FullText, which the suite's report trims.
			text := strings.TrimSpace(strings.Join(append(sr.ContainerHierarchyTexts, sr.LeafNodeText), " "))
			r.failure[text] = fmt.Sprintf("%s at %s:%d:\n%s", sr.State, filepath.Base(sr.Failure.Location.FileName),
				sr.Failure.Location.LineNumber, sr.Failure.Message)
		}
	}
	return &r, nil
}

// result is one word for how a spec ended.
func (s spec) result() string {
	switch {
	case s.Passed:
		return "passed"
	case s.Skipped:
		return "skipped"
	case !s.Conformant:
		return "not conformant"
	default:
		return "failed"
	}
}

// failures names every spec that did not pass, Required or Optional,
// except those skipped by skip, and any skipped one when partial (a run
// narrowed by hand); empty when there is none.
func (r *report) failures(skip map[string]string, partial bool) string {
	var lines []string
	if r.SuiteFailure != "" {
		lines = append(lines, "the suite failed to set up: "+r.SuiteFailure)
	}
	if r.Total == 0 {
		lines = append(lines, "the suite ran no spec")
	}
	for _, g := range r.Groups {
		for _, s := range g.Tests {
			if s.Passed || s.Skipped && (partial || skippedByUs(s.Desc, skip)) {
				continue
			}
			line := fmt.Sprintf("%s spec %s: %q%s", g.Name, s.result(), s.Desc, s.Message)
			if f := r.failure[s.Desc]; f != "" {
				line += "\n\t" + strings.ReplaceAll(strings.TrimSpace(f), "\n", "\n\t")
			}
			lines = append(lines, line)
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d specs passed:\n%s", r.Passed, r.Total, strings.Join(lines, "\n"))
}

func skippedByUs(desc string, skip map[string]string) bool {
	for text := range skip {
		if strings.Contains(desc, text) {
			return true
		}
	}
	return false
}

// table is the report as docs/conformance.md's table of results.
func (r *report) table() string {
	var b strings.Builder
	b.WriteString("| | spec | labels | result |\n|---|---|---|---|\n")
	for _, g := range r.Groups {
		for _, s := range g.Tests {
			result := s.result()
			if !s.Passed && s.Message != "" {
				result += ": " + strings.TrimPrefix(s.Message, " - ")
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, s.Desc, strings.Join(s.Labels, ", "), result)
		}
	}
	fmt.Fprintf(&b, "\n%d of %d passed\n", r.Passed, r.Total)
	return b.String()
}
