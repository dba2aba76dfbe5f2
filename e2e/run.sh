#!/usr/bin/env bash
# Runs the end-to-end suite: builds switchboard and the fake upstream, starts
# them (and the desk's tools server) on free loopback ports with desk.yaml,
# waits for /readyz, then runs the Node tests (node --test) that drive the
# gateway through the official openai client. Exits non-zero on any failure;
# always stops what it started.
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
  ln -s "$E2E_BIN_DIR/switchboard" "$work/switchboard"
  ln -s "$E2E_BIN_DIR/fakeupstream" "$work/fakeupstream"
else
  log "building binaries into $work"
  (cd "$root" && go build -o "$work/switchboard" ./cmd/switchboard \
              && go build -o "$work/fakeupstream" ./internal/fakeupstream/cmd/fakeupstream)
fi

if [[ ! -d $here/node_modules/openai ]]; then
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

# A free port for the gateway: the kernel picks one, the probe releases it.
port="$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')"
export GATEWAY_URL="http://127.0.0.1:$port"
"$work/switchboard" serve --config "$here/desk.yaml" --listen "127.0.0.1:$port" 2>"$work/gateway.log" &
pids+=($!)
ready=""
for _ in $(seq 200); do
  kill -0 "${pids[2]}" 2>/dev/null || { log "the gateway exited before it was ready"; exit 1; }
  if node -e 'fetch(process.argv[1]).then(r=>process.exit(r.ok?0:1),()=>process.exit(1))' "$GATEWAY_URL/readyz"; then
    ready=1
    break
  fi
  sleep 0.05
done
[[ -n $ready ]] || { log "the gateway was not ready on $GATEWAY_URL/readyz"; exit 1; }
log "gateway $GATEWAY_URL, fake upstream $FAKE_URL, tools $TOOLS_URL"

cd "$here"
# One file at a time: every test scripts the one shared fake upstream.
node --test --test-reporter=spec --test-concurrency=1 --test-timeout=15000 ./*.test.mjs
