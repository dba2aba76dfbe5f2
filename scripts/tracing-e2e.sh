#!/usr/bin/env bash
# Builds and starts a local Jaeger (127.0.0.1 only), sends a handoff
# conversation through the gateway with a known traceparent, and checks the
# trace read back from Jaeger's HTTP API (tests/tracing). Jaeger is stopped
# on the way out, whatever happens.
# TRACE_SVG_OUT=docs/handoff-trace.svg also renders the trace as a picture.
set -euo pipefail
cd "$(dirname "$0")/.."
export JAEGER_OTLP_HTTP_PORT="${JAEGER_OTLP_HTTP_PORT:-14318}"
export JAEGER_QUERY_PORT="${JAEGER_QUERY_PORT:-16696}"
export JAEGER_QUERY_GRPC_PORT="${JAEGER_QUERY_GRPC_PORT:-16695}"
trap 'bash scripts/jaeger.sh stop >/dev/null 2>&1 || true' EXIT
bash scripts/jaeger.sh start
export JAEGER_OTLP_URL="http://127.0.0.1:$JAEGER_OTLP_HTTP_PORT"
export JAEGER_QUERY_URL="http://127.0.0.1:$JAEGER_QUERY_PORT"
# Spans leave the batch exporter quickly; the test also flushes on close.
export OTEL_BSP_SCHEDULE_DELAY=100
json=""
if [[ -n "${TRACE_SVG_OUT:-}" ]]; then
  json="$(mktemp)"
  export TRACE_JSON_OUT="$json"
fi
go test -count=1 -v -run 'TestHandoffTraceInJaeger' ./tests/tracing
if [[ -n "$json" ]]; then
  go run ./tools/tracesvg -title "Switchboard: triage -> billing handoff trace" -o "$TRACE_SVG_OUT" "$json"
  echo "tracing-e2e: wrote $TRACE_SVG_OUT"
fi
