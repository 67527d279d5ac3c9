package main

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// loggingOnly are the flags of Kubernetes' logging options that the
// README leaves to Kubernetes' own documentation.
var loggingOnly = map[string]bool{
	"log-flush-frequency": true, "log-json-info-buffer-size": true, "log-json-split-stream": true,
	"log-text-info-buffer-size": true, "log-text-split-stream": true, "version": true,
}

// The README's table of flags is the program's: every flag is in it, every
// flag in it exists, and each default it states is the flag's.
func TestREADMEFlagsAreTheProgram(t *testing.T) {
	program := programFlags(t)
	doc := readmeFlags(t)
	for name, def := range doc {
		want, ok := program[name]
		switch {
		case !ok:
			t.Errorf("controller/README.md documents --%s, which mcs-controller does not have", name)
		case !sameDefault(def, want):
			t.Errorf("controller/README.md says --%s defaults to %q; mcs-controller's is %q", name, def, want)
		}
	}
	for name := range program {
		if _, ok := doc[name]; !ok && !loggingOnly[name] {
			t.Errorf("mcs-controller has --%s, which controller/README.md's table of flags does not document", name)
		}
	}
}

// programFlags are the flags mcs-controller -h prints, with their
// defaults ("" when it prints none).
func programFlags(t *testing.T) map[string]string {
	cmd := exec.Command(os.Args[0], "-h")
	cmd.Env = append(os.Environ(), runMain+"=1", "POD_NAMESPACE=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run() // -h exits 0, or 2 on older flag packages
	flags := map[string]string{}
	entry := regexp.MustCompile(`(?m)^  -(\S+)[^\n]*\n((?:    \t[^\n]*\n?)*)`)
	def := regexp.MustCompile(`\(default (.*)\)\s*$`)
	for _, m := range entry.FindAllStringSubmatch(out.String(), -1) {
		if strings.HasPrefix(m[1], "test.") {
			continue // the test binary's own, which runs main here
		}
		flags[m[1]] = ""
		if d := def.FindStringSubmatch(strings.TrimSpace(m[2])); d != nil {
			flags[m[1]] = strings.Trim(d[1], `"`)
		}
	}
	if len(flags) < 20 {
		t.Fatalf("mcs-controller -h printed %d flags:\n%s", len(flags), out.String())
	}
	return flags
}

// readmeFlags are the flags of controller/README.md's table, with the
// default it states. A row may name several flags, their defaults
// comma-separated in the same order; -renew-deadline after
// --leader-elect-lease-duration stands for --leader-elect-renew-deadline.
func readmeFlags(t *testing.T) map[string]string {
	data, err := os.ReadFile("../../controller/README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n| flag | default |")
	if !ok {
		t.Fatal("controller/README.md has no table of flags (| flag | default |)")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	flags := map[string]string{}
	for _, row := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			continue
		}
		names := strings.Split(strings.ReplaceAll(cells[1], "`", ""), ",")
		defaults := strings.Split(strings.ReplaceAll(cells[2], "`", ""), ",")
		first := strings.TrimLeft(strings.TrimSpace(names[0]), "-")
		for i, n := range names {
			n = strings.TrimSpace(n)
			name := strings.TrimLeft(n, "-")
			if i > 0 && !strings.HasPrefix(n, "--") && len(n) > 1 && n != "-v" {
				prefix := first[:strings.LastIndex(first[:strings.LastIndex(first, "-")], "-")+1]
				name = prefix + name
			}
			d := strings.TrimSpace(defaults[min(i, len(defaults)-1)])
			flags[name] = d
		}
	}
	return flags
}

// sameDefault reports whether the README's words for a default say the
// flag's: the same text, the same duration (15 s, 7 days), the program's
// last among alternatives, nothing said
// of an empty default (none, all), or prose for a default the program
// takes from elsewhere (in-cluster).
func sameDefault(doc, program string) bool {
	if doc == program || strings.HasSuffix(doc, " or "+program) { // $POD_NAMESPACE or mcs-system
		return true
	}
	if program == "" || program == "[]" {
		return true // none, all, in-cluster, $POD_NAMESPACE or …: prose
	}
	d, err := time.ParseDuration(program)
	if err != nil {
		return false
	}
	n, unit, _ := strings.Cut(doc, " ")
	v, err := strconv.ParseFloat(n, 64)
	if err != nil {
		return false
	}
	per := map[string]time.Duration{"s": time.Second, "minutes": time.Minute, "minute": time.Minute, "hours": time.Hour, "days": 24 * time.Hour, "day": 24 * time.Hour}[unit]
	return per != 0 && time.Duration(v*float64(per)) == d
}
