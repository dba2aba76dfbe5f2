#!/usr/bin/env bash
# Drives the console (GET /console) in headless Chromium: builds switchboard,
# installs Debian's chromium when it is missing, and runs this module's
# tests, which start the gateway on console.yaml (the offline demo desk,
# no upstream needed) and a browser per test, and stop both after.
#
#   bash e2e/browser/run.sh                # the browser tests
#   bash e2e/browser/run.sh screenshots    # rewrite docs/img/console-*.png
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-browser.XXXXXX")"
trap 'rm -rf "$work"' EXIT

log() { printf 'browser: %s\n' "$*" >&2; }

chromium="${CHROMIUM_BIN:-/usr/bin/chromium}"
if [[ ! -x $chromium ]]; then
  log "installing chromium (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq chromium >/dev/null
fi

log "building switchboard"
(cd "$root" && go build -o "$work/switchboard" ./cmd/switchboard)
export SWITCHBOARD_BIN="$work/switchboard" CHROMIUM_BIN="$chromium"

cd "$here"
go vet .
if [[ ${1:-} == screenshots ]]; then
  mkdir -p "$root/docs/img"
  CONSOLE_SCREENSHOTS="$root/docs/img" go test -count=1 -run TestScreenshots -timeout 5m -v .
else
  go test -count=1 -timeout 10m -v .
fi
