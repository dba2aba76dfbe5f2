#!/usr/bin/env bash
# Replays the red-team findings of issue 23 against the built gateway, with
# a hostile upstream, on loopback only; bounded (a few hundred connections,
# about a minute). By hand: make redteam. Not part of make test.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
CGO_ENABLED=0 go build -trimpath -o bin/switchboard ./cmd/switchboard
go run ./tools/redteam -gateway bin/switchboard
