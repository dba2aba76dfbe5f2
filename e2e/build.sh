#!/usr/bin/env bash
# build.sh DIR: builds what e2e/run.sh runs into DIR: switchboard, the fake
# upstream and the Go judges (e2e/goclient, vetted, and openai-go's own
# test binary). e2e/run.sh calls it, scripts/flake.sh once for many runs
# (E2E_BIN_DIR), and scripts/warm.sh to fill the Go caches early in CI.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
out="${1:?usage: e2e/build.sh DIR}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
(cd "$root" && go build -o "$out/switchboard" ./cmd/switchboard \
            && go build -o "$out/fakeupstream" ./internal/fakeupstream/cmd/fakeupstream)
# The Go judges, each compiled once: openai-go is a large package, and
# its own test binary (built from the module zip) is larger still.
(cd "$here/goclient" && go vet . \
            && go test -c -o "$out/goclient.test" . \
            && go test -c -vet=off -o "$out/openai-go.test" github.com/openai/openai-go/v3)
