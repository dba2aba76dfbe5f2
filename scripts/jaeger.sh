#!/usr/bin/env bash
# jaeger.sh build|start|stop|status - a local Jaeger for trace tests and demos.
#
#   build   compiles Jaeger (pinned in tools/jaeger/go.mod) into .cache/bin/jaeger;
#           skipped when it was built from the current tools/jaeger/go.mod and go.sum;
#           one build at a time (scripts/warm.sh may be running one in the
#           background): a second waits for the first and finds the binary built
#   start   builds if needed, starts Jaeger in the background with
#           tools/jaeger/config.yaml (in-memory storage, 127.0.0.1 only) and
#           waits until the OTLP receiver and the query API answer
#   stop    stops the Jaeger that start started
#   status  says whether it runs, and where
#
# Environment: JAEGER_OTLP_HTTP_PORT (4318), JAEGER_QUERY_PORT (16686),
# JAEGER_QUERY_GRPC_PORT (16685), JAEGER_START_TIMEOUT seconds (60).
# Files: .cache/jaeger.pid, .cache/jaeger.log, .cache/jaeger.urls.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache"
bin="$cache/bin/jaeger"
pidfile="$cache/jaeger.pid"
logfile="$cache/jaeger.log"
urlfile="$cache/jaeger.urls" # where the running Jaeger listens
config="$root/tools/jaeger/config.yaml"

export JAEGER_OTLP_HTTP_PORT="${JAEGER_OTLP_HTTP_PORT:-4318}"
export JAEGER_QUERY_PORT="${JAEGER_QUERY_PORT:-16686}"
export JAEGER_QUERY_GRPC_PORT="${JAEGER_QUERY_GRPC_PORT:-16685}"
otlp_url="http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT"
query_url="http://127.0.0.1:$JAEGER_QUERY_PORT"

log() { echo "jaeger.sh: $*" >&2; }

mkdir -p "$cache/bin"
# Keep .cache (binary, pid, log) out of git even without a .gitignore entry.
[[ -f "$cache/.gitignore" ]] || echo '*' >"$cache/.gitignore"

# pin identifies the pinned Jaeger: a hash of its module files. It is
# compared, not file times, because a CI cache restores the binary with its
# old mtime next to a freshly checked-out (so newer) go.sum.
pin() {
	cat "$root/tools/jaeger/go.mod" "$root/tools/jaeger/go.sum" | sha256sum | cut -d' ' -f1
}

# build runs build_locked under a lock on .cache/jaeger.build.lock, in a
# process of its own so that the lock goes with it and Jaeger, started
# later by this script, does not inherit it.
build() {
	flock "$cache/jaeger.build.lock" bash "${BASH_SOURCE[0]}" build-locked
}

build_locked() {
	local stamp="$bin.pin"
	if [[ -x "$bin" && -f "$stamp" && "$(cat "$stamp")" == "$(pin)" ]]; then
		return 0
	fi
	log "building Jaeger into ${bin#"$root"/} (minutes when the Go build cache is cold)"
	local start=$SECONDS tmp="$bin.tmp.$$"
	rm -f "$bin".tmp.* "$stamp"
	# Build to a temporary name: an interrupted build must not leave a
	# binary that looks up to date.
	(cd "$root/tools/jaeger" && go build -buildvcs=false -ldflags='-s -w' -o "$tmp" github.com/jaegertracing/jaeger/cmd/jaeger) || {
		rm -f "$tmp"
		return 1
	}
	mv -f "$tmp" "$bin"
	pin >"$stamp"
	log "built in $((SECONDS - start))s"
}

# running prints the pid of the Jaeger this script started, if it still runs.
# The command line is checked so that a recycled pid is never taken for it.
running() {
	[[ -f "$pidfile" ]] || return 1
	local pid
	pid="$(cat "$pidfile")"
	[[ "$pid" =~ ^[0-9]+$ ]] || return 1
	[[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$bin" || return 1
	echo "$pid"
}

ready() {
	curl -fs -o /dev/null --max-time 2 "$query_url/api/services" &&
		curl -fs -o /dev/null --max-time 2 -X POST -H 'Content-Type: application/json' -d '{}' "$otlp_url/v1/traces"
}

start() {
	local pid
	if pid="$(running)"; then
		log "already running (pid $pid): $(cat "$urlfile" 2>/dev/null)"
		return 0
	fi
	build
	# Fail fast, with a clear message, when something else holds a port.
	local port
	for port in "$JAEGER_OTLP_HTTP_PORT" "$JAEGER_QUERY_PORT" "$JAEGER_QUERY_GRPC_PORT"; do
		if ss -Htln "sport = :$port" 2>/dev/null | grep -q .; then
			log "port $port is already in use:"
			ss -Htlnp "sport = :$port" >&2 || true
			return 1
		fi
	done
	local start=$SECONDS timeout="${JAEGER_START_TIMEOUT:-60}"
	# setsid: the collector must outlive this script and not get the
	# terminal's signals. setsid forks when it leads a process group (under
	# job control), so the child writes its own pid before exec'ing Jaeger.
	rm -f "$pidfile"
	setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$1" --config "$2"' \
		"$pidfile" "$bin" "$config" </dev/null >"$logfile" 2>&1 &
	until [[ -s "$pidfile" ]]; do
		if ((SECONDS - start >= 5)); then
			log "Jaeger did not start; see ${logfile#"$root"/}"
			return 1
		fi
		sleep 0.05
	done
	pid="$(cat "$pidfile")"
	until ready; do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "Jaeger exited during start; last lines of ${logfile#"$root"/}:"
			tail -n 20 "$logfile" >&2
			rm -f "$pidfile"
			return 1
		fi
		if ((SECONDS - start >= timeout)); then
			log "Jaeger did not answer within ${timeout}s; see ${logfile#"$root"/}"
			stop
			return 1
		fi
		sleep 0.2
	done
	echo "OTLP $otlp_url, query $query_url" >"$urlfile"
	log "started (pid $pid) in $((SECONDS - start))s: $(cat "$urlfile")"
}

stop() {
	local pid
	if ! pid="$(running)"; then
		rm -f "$pidfile" "$urlfile"
		log "not running"
		return 0
	fi
	kill -TERM "$pid"
	local i
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		log "pid $pid ignored SIGTERM for 10s; killing it"
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile" "$urlfile"
	log "stopped (pid $pid)"
}

status() {
	local pid
	if pid="$(running)"; then
		echo "running (pid $pid): $(cat "$urlfile" 2>/dev/null)"
	else
		echo "not running"
		return 1
	fi
}

case "${1:-}" in
build | start | stop | status) "$1" ;;
build-locked) build_locked ;;
*)
	echo "usage: $0 build|start|stop|status" >&2
	exit 2
	;;
esac
