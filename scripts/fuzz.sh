#!/usr/bin/env bash
# Runs every fuzz target of the module for the given -fuzztime each: a
# duration (5m) or a count of executions (20000x, what CI uses).
# `go test -fuzz` takes one target at a time, so we find them by name.
# New inputs that fail land in the package's testdata/fuzz/ as usual.
set -euo pipefail
cd "$(dirname "$0")/.."
time=${1:-20000x}
grep -rl --include='*_test.go' '^func Fuzz' . | sort | while read -r file; do
  pkg=./$(dirname "${file#./}")
  for fn in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$file" | cut -d' ' -f2); do
    echo "fuzz: $fn ($pkg) for $time"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$time" "$pkg"
  done
done
