#!/usr/bin/env bash
# Redis at scale, for real (CONTRACT §13): starts a local Redis Cluster (3
# masters, 3 replicas) and a Sentinel setup (a master, 2 replicas, 3
# sentinels) on private loopback ports, and against each runs the session
# store suite (cache/storetest, and the rate limiter's tests), then a load
# of concurrent session turns with store.wait_replicas=1 during which the
# master holding a session is SIGKILLed; the test then checks that no
# acknowledged turn was lost. Every process is stopped on the way out.
#
#   bash scripts/redis-scale.sh          the short run (CI, about a minute)
#   bash scripts/redis-scale.sh long     a longer, heavier load, by hand
#
# Ports: REDIS_SCALE_PORT (default 7100) and the next 12 for Redis,
# REDIS_SCALE_SENTINEL_PORT (default 26400) and the next 2 for sentinels.
# The shared Redis on 6379 is never touched.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
mode="${1:-short}"
base="${REDIS_SCALE_PORT:-7100}"
sbase="${REDIS_SCALE_SENTINEL_PORT:-26400}"
case "$mode" in
  short) seconds=8; workers=16 ;;
  long) seconds=60; workers=64 ;;
  *) echo "usage: $0 [short|long]" >&2; exit 2 ;;
esac

if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
  echo "redis-scale: installing redis-server (Debian)"
  apt-get update -qq && apt-get install -y -qq redis-server >/dev/null
fi
# Debian's redis-sentinel package ships a redis-sentinel binary; redis-server
# --sentinel is the same program.
sentinel=(redis-server)
sentinel_flag=(--sentinel)
if command -v redis-sentinel >/dev/null; then sentinel=(redis-sentinel); sentinel_flag=(); fi

tmp="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  for f in "$tmp"/*/restarted.pid; do [[ -f "$f" ]] && kill -9 "$(cat "$f")" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in $(seq "$base" $((base + 12))) $(seq "$sbase" $((sbase + 2))); do
  if ! port_free "$p"; then
    echo "redis-scale: port $p is in use; set REDIS_SCALE_PORT / REDIS_SCALE_SENTINEL_PORT" >&2
    exit 1
  fi
done

# start_redis PORT ARGS...: a redis-server that keeps nothing on disk.
start_redis() {
  local port=$1; shift
  mkdir -p "$tmp/$port"
  redis-server --port "$port" --bind 127.0.0.1 --dir "$tmp/$port" --save "" --appendonly no \
    --daemonize no --logfile "$tmp/$port/log" "$@" &
  pids+=($!)
}
wait_ping() {
  for _ in $(seq 100); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "redis-scale: nothing answers on port $1" >&2
  cat "$tmp/$1/log" >&2 || true
  return 1
}

# run_suite URL SEEDS MASTER RESTART: the store suite, then the failover
# load; RESTART brings the killed node back (PORT is set) once a replica
# has taken over.
run_suite() {
  echo "redis-scale: store suite on $1"
  SWITCHBOARD_TEST_REDIS_URL="$1" go test -count=1 -run 'TestRedis$|TestLimiters' ./cache
  echo "redis-scale: load with a master killed on $1 (${seconds}s, $workers sessions)"
  SWITCHBOARD_SCALE_URL="$1" SWITCHBOARD_SCALE_SEEDS="$2" SWITCHBOARD_SCALE_MASTER="$3" SWITCHBOARD_SCALE_RESTART="$4" \
    SWITCHBOARD_SCALE_SECONDS="$seconds" SWITCHBOARD_SCALE_WORKERS="$workers" \
    go test -count=1 -v -run TestFailoverUnderLoad ./tests/redisscale | grep -E '^(scale:|--- |ok|FAIL|PASS)|failover_test' || { logs; return 1; }
}

# logs prints the end of every sentinel's log: why a failover did or did
# not come is there (+sdown, +odown, +vote-for-leader, -failover-abort-*).
logs() {
  for f in "$tmp"/s*/log; do
    [[ -f "$f" ]] || continue
    echo "redis-scale: $f" >&2
    tail -n 40 "$f" >&2
  done
}

# --- Cluster: 3 masters, 3 replicas ------------------------------------
cluster=()
for i in 0 1 2 3 4 5; do
  p=$((base + i))
  start_redis "$p" --cluster-enabled yes --cluster-config-file "$tmp/$p/nodes.conf" \
    --cluster-node-timeout 1000 --cluster-replica-validity-factor 0
  cluster+=("127.0.0.1:$p")
done
for i in 0 1 2 3 4 5; do wait_ping $((base + i)); done
redis-cli --cluster create "${cluster[@]}" --cluster-replicas 1 --cluster-yes >"$tmp/cluster-create.log"
for _ in $(seq 100); do
  ok=1
  for i in 0 1 2 3 4 5; do
    redis-cli -p $((base + i)) cluster info | grep -q 'cluster_state:ok' || ok=0
  done
  [[ $ok == 1 ]] && break
  sleep 0.2
done
[[ $ok == 1 ]] || { echo "redis-scale: the cluster is not ok" >&2; exit 1; }
# Replicas must have synced before a master may die.
for _ in $(seq 100); do
  [[ "$(redis-cli -p "$base" cluster nodes | grep -c slave)" == 3 ]] && break
  sleep 0.2
done
seeds="$(IFS=,; echo "${cluster[*]:0:3}")"
restart_opts="--port \$PORT --bind 127.0.0.1 --dir $tmp/\$PORT --save '' --appendonly no --daemonize yes --pidfile $tmp/\$PORT/restarted.pid --logfile $tmp/\$PORT/log.restarted"
run_suite "redis-cluster://$seeds" "$(IFS=,; echo "${cluster[*]}")" "" \
  "redis-server $restart_opts --cluster-enabled yes --cluster-config-file $tmp/\$PORT/nodes.conf --cluster-node-timeout 1000 --cluster-replica-validity-factor 0"

# --- Sentinel: a master, 2 replicas, 3 sentinels -----------------------
m=$((base + 10))
start_redis "$m"
start_redis $((m + 1)) --replicaof 127.0.0.1 "$m"
start_redis $((m + 2)) --replicaof 127.0.0.1 "$m"
for p in "$m" $((m + 1)) $((m + 2)); do wait_ping "$p"; done
sentinels=()
for i in 0 1 2; do
  p=$((sbase + i))
  mkdir -p "$tmp/s$p"
  cat >"$tmp/s$p/sentinel.conf" <<EOF
port $p
bind 127.0.0.1
dir $tmp/s$p
logfile $tmp/s$p/log
sentinel monitor sbscale 127.0.0.1 $m 2
sentinel down-after-milliseconds sbscale 1000
sentinel failover-timeout sbscale 5000
sentinel parallel-syncs sbscale 2
EOF
  "${sentinel[@]}" "$tmp/s$p/sentinel.conf" "${sentinel_flag[@]}" &
  pids+=($!)
  sentinels+=("127.0.0.1:$p")
done
# Every sentinel must know both synced replicas before the master may die: a
# sentinel learns them from the master's INFO, which it asks every 10 s, and
# one that asked before the replicas had connected knows none until its next
# ask; with the master killed before that, it finds no replica to promote
# and the failover never comes.
sentinel_field() { redis-cli -p "$1" sentinel master sbscale 2>/dev/null | grep -A1 "^$2\$" | tail -1 || true; }
ready=""
for _ in $(seq 150); do
  n="$(redis-cli -p "$m" info replication | sed -n 's/^connected_slaves:\([0-9]*\).*/\1/p')"
  ready="master's replicas $n"
  ok=$([[ "$n" == 2 ]] && echo 1 || echo 0)
  # Replicas must have synced before a master may die, as in the cluster.
  for r in $((m + 1)) $((m + 2)); do
    l="$(redis-cli -p "$r" info replication | sed -n 's/^master_link_status:\([a-z]*\).*/\1/p')"
    ready="$ready; replica $r link ${l:-none}"
    [[ "$l" == up ]] || ok=0
  done
  for i in 0 1 2; do
    r="$(sentinel_field $((sbase + i)) num-slaves)"
    o="$(sentinel_field $((sbase + i)) num-other-sentinels)"
    ready="$ready; sentinel $((sbase + i)): replicas $r, other sentinels $o"
    [[ "$r" == 2 && "$o" == 2 ]] || ok=0
  done
  [[ $ok == 1 ]] && break
  sleep 0.2
done
[[ $ok == 1 ]] || { echo "redis-scale: sentinel setup not ready ($ready)" >&2; exit 1; }
sseeds="$(IFS=,; echo "${sentinels[*]}")"
run_suite "redis-sentinel://$sseeds/0?master=sbscale" "$sseeds" sbscale "redis-server $restart_opts"

echo "redis-scale: passed ($mode)"
