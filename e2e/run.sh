#!/usr/bin/env bash
# Runs the end-to-end suite: builds switchboard, the fake upstream and the
# Go judges (e2e/goclient, and openai-go's own test binary), starts the
# fake upstream, the desk's tools server and two gateways on free loopback
# ports (desk.yaml; sdk.yaml, whose graphs carry the model names
# openai-go's generated tests ask for), waits for /readyz, then runs the
# Node tests (node --test: the official openai Node client, and
# CompatCanary's chat profile) and the Go suite (the official openai-go
# client, openai-go's generated tests, and OpenAI's published schema over
# every reply both suites read). Exits non-zero on any failure; always
# stops what it started.
#
#   bash e2e/run.sh                 # from anywhere
#   SWITCHBOARD_STORE_URL=redis://127.0.0.1:6379/0 bash e2e/run.sh
#   E2E_KEEP_LOGS=1 bash e2e/run.sh # keep the processes' logs
#   E2E_BIN_DIR=DIR bash e2e/run.sh # use DIR/switchboard and DIR/fakeupstream
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-e2e.XXXXXX")"
pids=()

log() { printf 'e2e: %s\n' "$*" >&2; }

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do
    # Give each process up to 5 s to stop, then kill it.
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [[ $status -ne 0 ]]; then
    for f in "$work"/*.log; do
      [[ -s $f ]] || continue
      log "---- last lines of $(basename "$f") ----"
      tail -n 40 "$f" >&2
    done
  fi
  if [[ -n ${E2E_KEEP_LOGS:-} ]]; then log "logs kept in $work"; else rm -rf "$work"; fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# wait_file PID FILE: waits until FILE exists, failing when PID dies first.
wait_file() {
  local pid=$1 file=$2
  for _ in $(seq 200); do
    [[ -s $file ]] && return 0
    kill -0 "$pid" 2>/dev/null || { log "process $pid died before writing $file"; return 1; }
    sleep 0.05
  done
  log "timed out waiting for $file"
  return 1
}

command -v go >/dev/null || { log "go is not on PATH"; exit 1; }
command -v node >/dev/null || { log "node is not on PATH"; exit 1; }

if [[ -n ${E2E_BIN_DIR:-} ]]; then
  # Prebuilt by the caller (scripts/flake.sh builds once for many runs).
  log "using the binaries in $E2E_BIN_DIR"
  for bin in switchboard fakeupstream goclient.test openai-go.test; do
    ln -s "$E2E_BIN_DIR/$bin" "$work/$bin"
  done
else
  log "building binaries and the Go judges into $work (e2e/build.sh)"
  bash "$here/build.sh" "$work"
fi

if [[ ! -d $here/node_modules/openai || ! -d $here/node_modules/compatcanary || ! -d $here/node_modules/@modelcontextprotocol/sdk ]]; then
  log "installing node dependencies (npm ci)"
  (cd "$here" && npm ci --no-audit --no-fund)
fi

"$work/fakeupstream" --listen 127.0.0.1:0 --addr-file "$work/fake.addr" 2>"$work/fakeupstream.log" &
pids+=($!)
node "$here/tools-server.mjs" "$work/tools.addr" 2>"$work/tools.log" &
pids+=($!)
wait_file "${pids[0]}" "$work/fake.addr"
wait_file "${pids[1]}" "$work/tools.addr"
export FAKE_URL="http://$(<"$work/fake.addr")"
export TOOLS_URL="http://$(<"$work/tools.addr")"

# start_gateway CONFIG: starts a gateway on a port the kernel picks, reads
# the address back from its "switchboard listening" log line (a port picked
# by a probe and released before the gateway binds it could be taken by any
# connection meanwhile), waits for /readyz and writes its URL.
start_gateway() {
  local config=$1 log url="" pid
  log="$work/gateway-$(basename "$config" .yaml).log"
  "$work/switchboard" serve --config "$config" --listen 127.0.0.1:0 2>"$log" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 200); do
    kill -0 "$pid" 2>/dev/null || { log "the gateway on $config exited before it was ready"; return 1; }
    if [[ -z $url ]]; then
      url="$(node -e '
        for (const line of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) {
          try { const r = JSON.parse(line); if (r.msg === "switchboard listening") { console.log("http://" + r.addr); break } } catch {}
        }' "$log")"
    fi
    if [[ -n $url ]] && node -e 'fetch(process.argv[1]).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' "$url/readyz"; then
      echo "$url"
      return 0
    fi
    sleep 0.05
  done
  log "the gateway on $config was not ready (${url:-no address logged yet})"
  return 1
}
# Not in $(...), whose subshell would keep the pids from cleanup.
start_gateway "$here/desk.yaml" >"$work/desk.url"
start_gateway "$here/sdk.yaml" >"$work/sdk.url"
export GATEWAY_URL="$(<"$work/desk.url")"
export SDK_GATEWAY_URL="$(<"$work/sdk.url")"
log "gateway $GATEWAY_URL (openai-go's tests: $SDK_GATEWAY_URL), fake upstream $FAKE_URL, tools $TOOLS_URL"

# The Node suite records every reply it reads whole (helpers.mjs); the Go
# suite has the published schema judge them.
export E2E_REPLIES="$work/node-replies.jsonl"
: >"$E2E_REPLIES"
export OPENAI_GO_TEST_BIN="$work/openai-go.test"

cd "$here"
status=0
# One file at a time: every test scripts the one shared fake upstream. The
# timeout also bounds a whole file, imports included: the Agents SDK alone
# takes seconds to load on a busy 2-core machine.
node --test --test-reporter=spec --test-concurrency=1 --test-timeout=60000 ./*.test.mjs || status=$?
log "the Go suite: openai-go, its generated tests, the published schema"
(cd "$here/goclient" && "$work/goclient.test" -test.v -test.count=1 -test.timeout=5m) || status=$?
exit "$status"
