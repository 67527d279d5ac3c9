package process

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// StatusKB reads the fields of a procfs status file (/proc/PID/status)
// that are given in kB, in bytes: VmRSS, VmHWM and the like. Other fields,
// and a kB field whose number does not parse, are left out.
func StatusKB(path string) (map[string]int64, error) {
	f, err := os.Open(path) // #nosec G304 -- a procfs status file
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		num, unit, _ := strings.Cut(strings.TrimSpace(val), " ")
		if !ok || unit != "kB" {
			continue
		}
		if n, err := strconv.ParseInt(num, 10, 64); err == nil {
			out[key] = n << 10
		}
	}
	return out, sc.Err()
}
