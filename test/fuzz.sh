#!/usr/bin/env bash
# make test-fuzz: every fuzz target of the module, FUZZTIME each.
set -euo pipefail
# Go 1.27.3, as every build of the project (README.md, Two commands).
export GOTOOLCHAIN=go1.27.3
fuzztime=${1:?usage: fuzz.sh FUZZTIME}
go=${GO:-go}
for pkg in $($go list ./...); do
  for fz in $($go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $fz ($fuzztime)"
    $go test -run '^$' -fuzz "^$fz\$" -fuzztime "$fuzztime" "$pkg"
  done
done
