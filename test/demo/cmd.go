package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// commandTimeout bounds each command the story runs.
const commandTimeout = time.Minute

// say narrates.
func (s *story) say(format string, args ...any) {
	fmt.Fprintf(s.w, format+"\n", args...)
}

// run shows a command as a user types it at the top of the repository
// (with the exports step 7 prints), runs it and shows its output. kubectl
// is _output/bin/kubectl, talking to the lab's kubeconfig.
func (s *story) run(ctx context.Context, name string, args ...string) (string, error) {
	fmt.Fprintf(s.w, "$ %s\n", s.line(append([]string{name}, args...)...))
	ctx, cancel := context.WithTimeout(ctx, commandTimeout)
	defer cancel()
	bin := name
	if name == "kubectl" {
		bin = s.kubectlBin
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = s.root
	cmd.Env = append(os.Environ(), "KUBECONFIG="+s.kubeconfig)
	out, err := cmd.CombinedOutput()
	s.w.Write(out)
	if err != nil {
		return string(out), fmt.Errorf("%s: %w", s.line(append([]string{name}, args...)...), err)
	}
	return string(out), nil
}

// kubectl runs kubectl with args, shown.
func (s *story) kubectl(ctx context.Context, args ...string) error {
	_, err := s.run(ctx, "kubectl", args...)
	return err
}

// show prints a file of the repository as cat would.
func (s *story) show(path string) error {
	b, err := os.ReadFile(filepath.Join(s.root, path))
	if err != nil {
		return err
	}
	fmt.Fprintf(s.w, "$ cat %s\n%s", path, b)
	return nil
}

// waitFor polls check until it is nil, and says how long that took.
func (s *story) waitFor(ctx context.Context, what string, timeout time.Duration, check func(context.Context) error) error {
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until %s: not within %s: %v", what, timeout, last)
	}
	s.say("(%s: %.1fs)", what, time.Since(start).Seconds())
	return nil
}

// rel shows path relative to the top of the repository, where make demo
// runs.
func (s *story) rel(path string) string {
	if r, err := filepath.Rel(s.root, path); err == nil && !strings.HasPrefix(r, "..") {
		return r
	}
	return path
}

// line shows a command line, paths relative to the top of the repository
// (also in NAME=PATH), quoted for a shell where needed.
func (s *story) line(args ...string) string {
	var words []string
	for _, a := range args {
		if k, v, ok := strings.Cut(a, "="); ok && filepath.IsAbs(v) && !strings.HasPrefix(k, "-") {
			a = k + "=" + s.rel(v)
		} else if filepath.IsAbs(a) {
			a = s.rel(a)
		}
		if strings.ContainsAny(a, " \t\"'{}[]*$\\;&|<>()") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}
