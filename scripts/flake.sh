#!/usr/bin/env bash
# Runs the e2e suite (e2e/run.sh) many times beside CPU hogs and reports
# every failure: a run that fails by chance is a bug, in the gateway or in
# a test double. By hand only (make flake); not part of make test.
#
#   make flake                               # 100 runs, 2 hogs
#   FLAKE_RUNS=20 FLAKE_HOGS=4 make flake
#   FLAKE_STOP=1 make flake                  # stop at the first failure
#
# Each hog is a `yes >/dev/null` process, started here and killed (by its
# pid) when the script ends, however it ends. The binaries are built once.
# A run that fails keeps its whole output in the log directory printed at
# the end; the summary names the tests that failed. Exits 1 when any run
# failed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
runs=${FLAKE_RUNS:-100}
hogs=${FLAKE_HOGS:-2}
run_timeout=${FLAKE_RUN_TIMEOUT:-300} # seconds for one run of the suite
stop_on_fail=${FLAKE_STOP:-}
[[ $runs =~ ^[1-9][0-9]*$ && $hogs =~ ^[0-9]+$ && $run_timeout =~ ^[1-9][0-9]*$ ]] || {
  echo "flake: FLAKE_RUNS and FLAKE_RUN_TIMEOUT must be positive integers, FLAKE_HOGS an integer" >&2
  exit 2
}
work="$(mktemp -d "${TMPDIR:-/tmp}/switchboard-flake.XXXXXX")"
hog_pids=()

log() { printf 'flake: %s\n' "$*" >&2; }

stop_hogs() {
  for pid in "${hog_pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${hog_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  hog_pids=()
}
trap stop_hogs EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log "building binaries into $work/bin"
bash "$root/e2e/build.sh" "$work/bin"
if [[ ! -d $root/e2e/node_modules/openai || ! -d $root/e2e/node_modules/compatcanary ]]; then
  log "installing node dependencies (npm ci)"
  (cd "$root/e2e" && npm ci --no-audit --no-fund)
fi

for _ in $(seq "$hogs"); do
  yes >/dev/null &
  hog_pids+=($!)
done
log "$runs runs of e2e/run.sh beside $hogs CPU hogs (pids ${hog_pids[*]:-none}); logs in $work"

failed=0
done_runs=0
declare -A failed_tests=()
start=$(date +%s)
for i in $(seq "$runs"); do
  out="$work/run-$i.log"
  t0=$(date +%s)
  status=0
  E2E_BIN_DIR="$work/bin" timeout --kill-after=10 "$run_timeout" bash "$root/e2e/run.sh" >"$out" 2>&1 || status=$?
  done_runs=$i
  if [[ $status -eq 0 ]]; then
    rm -f "$out"
    log "run $i/$runs: ok ($(( $(date +%s) - t0 )) s)"
    continue
  fi
  failed=$((failed + 1))
  # node's spec reporter marks a failed test with ✖ (the summary repeats it).
  names="$(grep -E '^[[:space:]]*✖ ' "$out" | sed -E 's/^[[:space:]]*✖ //; s/ \([0-9.]+m?s\)$//' | grep -vx 'failing tests:' | sort -u || true)"
  # A file that node's --test-timeout cancelled is named with no test.
  if grep -q "test timed out after" "$out"; then
    names="${names:+$names$'\n'}($(grep -m1 -o 'test timed out after [0-9]*ms' "$out"))"
  fi
  [[ $status -eq 124 ]] && names="${names:+$names$'\n'}(the run timed out after ${run_timeout}s)"
  [[ -n $names ]] || names="(no failed test named; see the log)"
  while IFS= read -r n; do failed_tests["$n"]=$(( ${failed_tests["$n"]:-0} + 1 )); done <<<"$names"
  log "run $i/$runs: FAILED (exit $status), log $out:"
  sed 's/^/    /' <<<"$names" >&2
  [[ -z $stop_on_fail ]] || break
done
stop_hogs

echo "flake: $done_runs runs in $(( $(date +%s) - start )) s beside $hogs CPU hogs: $failed failed"
for n in "${!failed_tests[@]}"; do
  echo "flake:   ${failed_tests[$n]}x $n"
done
if [[ $failed -gt 0 ]]; then
  echo "flake: the failed runs' logs are in $work"
  exit 1
fi
rm -rf "$work"
