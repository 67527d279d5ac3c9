#!/usr/bin/env bash
# make test-fuzz: every fuzz target of the module, FUZZTIME each.
#
# Go 1.26's fuzzing coordinator can end a run that found nothing with a
# bare "context deadline exceeded" when -fuzztime expires while a worker
# is still busy, as on a loaded machine (go.dev/issue/75804, fixed in Go
# 1.27). Such a run, with no failing input written, runs once more; any
# other failure, or the same twice, fails.
set -euo pipefail
# Go 1.27.3, as every build of the project (README.md, Two commands).
export GOTOOLCHAIN=go1.27.3
fuzztime=${1:?usage: fuzz.sh FUZZTIME}
go=${GO:-go}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for pkg in $($go list ./...); do
  for fz in $($go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    for try in 1 2; do
      echo "fuzz $pkg $fz ($fuzztime)"
      status=0
      $go test -run '^$' -fuzz "^$fz\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log" || status=$?
      ((status == 0)) && break
      if ((try == 2)) || grep -q 'Failing input written to' "$log" || ! grep -q 'context deadline exceeded' "$log"; then
        exit 1
      fi
      echo "fuzz: $fz ended on Go's fuzztime race (go.dev/issue/75804), no failing input written: once more"
    done
  done
done
