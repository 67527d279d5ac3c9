package main

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

const goBenchTimeout = 5 * time.Minute

// runGoBench runs the plugin's Go benchmarks (the answer path without the
// network) and returns their result lines.
func runGoBench(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, goBenchTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", ".", "-benchmem", "-count", "1", "./plugin/mcs/")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench ./plugin/mcs/: %w\n%s", err, out)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Benchmark") || strings.HasPrefix(l, "cpu:") {
			lines = append(lines, l)
		}
	}
	return lines, nil
}
