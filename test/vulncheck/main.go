// Command vulncheck runs govulncheck on the product's module against the
// Go vulnerability database of this module's golang.org/x/vulndb, which
// it indexes once into -db, and fails on every vulnerability the code
// calls that accepted.txt does not name with its reason (make vulncheck;
// README.md, Make targets). Nothing is fetched but Go modules.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

func main() {
	db := flag.String("db", "../../_output/vulndb", "directory of the indexed database, made when missing")
	accepted := flag.String("accepted", "accepted.txt", "vulnerabilities accepted, one ID per line with its reason")
	dir := flag.String("C", "../..", "the module to check")
	flag.Parse()
	if err := run(context.Background(), *db, *accepted, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "vulncheck:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, db, acceptedFile, dir string) error {
	accepted, err := readAccepted(acceptedFile)
	if err != nil {
		return err
	}
	if db, err = filepath.Abs(db); err != nil {
		return err
	}
	if err := index(ctx, db); err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", "tool", "govulncheck", "-C", dir, "-db", "file://"+db, "-format", "json", "./...")
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("govulncheck: %w", err)
	}
	called, err := calledVulns(&out)
	if err != nil {
		return err
	}
	var fail []string
	for _, id := range called {
		if why, ok := accepted[id]; ok {
			fmt.Printf("%s accepted: %s\n", id, why)
		} else {
			fail = append(fail, id)
		}
	}
	if len(fail) > 0 {
		return fmt.Errorf("the code calls %s: see https://pkg.go.dev/vuln/<ID>, and `go tool govulncheck -C %s -db file://%s ./...` for the traces", strings.Join(fail, ", "), dir, db)
	}
	fmt.Printf("govulncheck: no vulnerability called but those accepted (%d)\n", len(called))
	return nil
}

// index makes the database in db from x/vulndb's OSV files, unless a
// previous run did.
func index(ctx context.Context, db string) error {
	if _, err := os.Stat(filepath.Join(db, "index", "db.json")); err == nil {
		return nil
	}
	var mod struct{ Dir, Error string }
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", "golang.org/x/vulndb").Output()
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Error != "" {
		return fmt.Errorf("golang.org/x/vulndb: %v %s", err, mod.Error)
	}
	tmp := db + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "indexdb", "-vulns", filepath.Join(mod.Dir, "data", "osv"), "-out", tmp)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("indexdb: %w", err)
	}
	return os.Rename(tmp, db)
}

// readAccepted reads "ID reason" lines; # starts a comment.
func readAccepted(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	accepted := map[string]string{}
	s := bufio.NewScanner(f)
	for n := 1; s.Scan(); n++ {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		id, why, _ := strings.Cut(line, " ")
		if strings.TrimSpace(why) == "" {
			return nil, fmt.Errorf("%s:%d: %s has no reason", path, n, id)
		}
		accepted[id] = strings.TrimSpace(why)
	}
	return accepted, s.Err()
}

// calledVulns are the IDs of govulncheck's findings whose trace reaches a
// function: vulnerable code the module calls, not code it merely imports.
func calledVulns(r io.Reader) ([]string, error) {
	dec := json.NewDecoder(r)
	var ids []string
	for {
		var msg struct {
			Finding *struct {
				OSV   string `json:"osv"`
				Trace []struct {
					Function string `json:"function"`
				} `json:"trace"`
			} `json:"finding"`
		}
		err := dec.Decode(&msg)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("govulncheck's output: %w", err)
		}
		if f := msg.Finding; f != nil && len(f.Trace) > 0 && f.Trace[0].Function != "" && !slices.Contains(ids, f.OSV) {
			ids = append(ids, f.OSV)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
