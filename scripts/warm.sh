#!/usr/bin/env bash
# warm.sh: fills the Go module and build caches for the suite's heaviest
# builds, so that on a fresh machine they compile while the unit tests run
# rather than after them: the binaries and Go judges of e2e/run.sh
# (e2e/build.sh), Jaeger (scripts/jaeger.sh build) and Helm (scripts/helm-check.sh
# warm). On a fresh machine these took about 10 of CI's 24 minutes, most
# of it compiling; with warm caches they take seconds.
#
# .ci/run starts it in the background at the lowest CPU priority, so the
# tests keep the CPU they would have had alone and the builds take what the
# tests leave idle. Each step it warms runs again in its own script, which
# then finds the work done (Jaeger's build waits for this one rather than
# racing it); a step that fails here fails there too, where it counts, so
# here a failure is only reported.
set -uo pipefail
cd "$(dirname "$0")/.."

# nice alone is not enough where the kernel groups processes by session
# (sched_autogroup, on here): .ci/run starts this script in a session of
# its own, and a session's group competes with the others as a whole,
# whatever its processes' nice, so the builds took half the CPU from the
# tests. Lowering the group's own priority makes them take only what the
# tests leave idle.
if [[ -w /proc/self/autogroup ]]; then
  echo 19 >/proc/self/autogroup 2>/dev/null || true
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# step NAME COMMAND...: runs COMMAND with its output in $tmp/NAME.log and
# says how it went, with the log's end when it failed.
step() {
  local name=$1 start=$SECONDS
  shift
  if "$@" >"$tmp/$name.log" 2>&1; then
    echo "warm: $name in $((SECONDS - start))s"
  else
    echo "warm: $name failed after $((SECONDS - start))s (its own step will report it):"
    tail -n 5 "$tmp/$name.log" | sed 's/^/warm:   /'
  fi
}

# e2e/run.sh's own builds, which it then finds in the build cache.
step e2e-judges bash e2e/build.sh "$tmp/e2e"
rm -rf "$tmp/e2e"
step jaeger bash scripts/jaeger.sh build
step helm bash scripts/helm-check.sh warm
