package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// promqlWords are PromQL's keywords and aggregation operators, which
// PromQL reads in any case: words of an expression that select no metric.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true, "inf": true, "nan": true,
}

// labelLists are the keywords followed by a list of label names in
// parentheses.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames returns the metric names a PromQL expression (or a Grafana
// query, with its $variables) selects, each once, in order. A name is any
// identifier but keywords, functions (a name before "("), label names (in
// {…} and the lists after by, without, on, ignoring, group_left and
// group_right), strings and what is in […] (ranges, $__rate_interval).
// github.com/prometheus/prometheus's parser would do it too, but it is not
// a dependency of this module and it is a heavy one.
func metricNames(expr string) ([]string, error) {
	var names []string
	depth := 0 // of parentheses
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '(' || c == ')':
			if c == '(' {
				depth++
			} else if depth--; depth < 0 {
				return nil, fmt.Errorf("%q: ) at %d closes nothing", expr, i)
			}
			i++
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{' || c == '[':
			end, err := skipBrackets(expr, i)
			if err != nil {
				return nil, err
			}
			if strings.Contains(expr[i:end], "__name__") {
				return nil, fmt.Errorf("%q selects metrics by __name__, which this check cannot follow", expr)
			}
			i = end
		case c == '#': // a comment, to the end of the line
			end := strings.IndexByte(expr[i:], '\n')
			if end < 0 {
				end = len(expr) - i
			}
			i += end
		case c == '$' || isDigit(c) || c == '.':
			// A Grafana variable, a number or a duration (5m, 1e3): no name.
			i++
			for i < len(expr) && (isNameChar(expr[i]) || expr[i] == '.') {
				i++
			}
		case isNameChar(c):
			end := i
			for end < len(expr) && isNameChar(expr[end]) {
				end++
			}
			word := expr[i:end]
			next := strings.TrimLeft(expr[end:], " \t\n")
			i = end
			switch {
			case labelLists[strings.ToLower(word)] && strings.HasPrefix(next, "("):
				list, err := skipBrackets(expr, len(expr)-len(next))
				if err != nil {
					return nil, err
				}
				i = list
			case promqlWords[strings.ToLower(word)] || strings.HasPrefix(next, "("):
			case !slices.Contains(names, word):
				names = append(names, word)
			}
		default:
			i++
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("%q: %d ( not closed", expr, depth)
	}
	return names, nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isNameChar(c byte) bool {
	return c == '_' || c == ':' || isDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// skipString returns the end of the string literal at expr[start]; only
// double and single quotes have escapes.
func skipString(expr string, start int) (int, error) {
	quote := expr[start]
	for i := start + 1; i < len(expr); i++ {
		switch {
		case expr[i] == '\\' && quote != '`':
			i++
		case expr[i] == quote:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("%q: a string at %d is not closed", expr, start)
}

// skipBrackets returns the end of the bracketed part at expr[start] ({…},
// […] or (…)), with the strings and brackets inside it.
func skipBrackets(expr string, start int) (int, error) {
	closing := map[byte]byte{'{': '}', '[': ']', '(': ')'}
	stack := []byte{closing[expr[start]]}
	for i := start + 1; i < len(expr); i++ {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return 0, err
			}
			i = end - 1
		case closing[c] != 0:
			stack = append(stack, closing[c])
		case c == stack[len(stack)-1]:
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i + 1, nil
			}
		}
	}
	return 0, fmt.Errorf("%q: %c at %d is not closed", expr, expr[start], start)
}

// metricNames finds what PromQL selects, and nothing else, in the forms the
// rules and the dashboard use and a few they might.
func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{"max by (cluster) (mcs_member_reachable) == 0", []string{"mcs_member_reachable"}},
		{"histogram_quantile(0.99, sum by (le) (rate(mcs_propagation_seconds_bucket[10m]))) > 1", []string{"mcs_propagation_seconds_bucket"}},
		{`sum(rate(a_total{result="error", x=~"b|c{d}"}[$__rate_interval])) by (cluster) / on (cluster) group_left (y) b_info offset 5m`, []string{"a_total", "b_info"}},
		{`max(up{job="x"}) < 1 or absent(up{job='x'}) unless bool_metric`, []string{"up", "bool_metric"}},
		{"SUM(x) BY (y) * 1e3 + Inf - foo:bar_rate5m @ start()", []string{"x", "foo:bar_rate5m"}},
		{"x == 0 # a comment naming y\n or z", []string{"x", "z"}},
		{"max without (instance, pod) (coredns_mcs_stale_clusters) > 0", []string{"coredns_mcs_stale_clusters"}},
	} {
		got, err := metricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	for _, expr := range []string{`{__name__="x"}`, `x{a="b"`, `sum(x[5m]`, `x{a="b}`, `max(x))`} {
		if got, err := metricNames(expr); err == nil {
			t.Errorf("metricNames(%q) = %q; want an error: the names cannot be known", expr, got)
		}
	}
}
