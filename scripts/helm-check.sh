#!/usr/bin/env bash
# Checks the Helm chart (deploy/helm/switchboard) as CI does: `helm lint
# --strict`, then `helm template` for each values file in the chart's ci/
# validated against the Kubernetes API schemas (tools/kubeschema, strict:
# unknown fields fail) and the rendered gateway config checked with
# `switchboard validate`. Every tool comes from the Go module proxy, pinned:
# Helm from tools/helm/go.mod, the schemas from the k8s.io/kubernetes module
# (api/openapi-spec/swagger.json) and the ServiceMonitor CRD from the
# prometheus-operator module; nothing else is downloaded.
# `helm-check.sh warm` only downloads and builds, to fill the Go caches
# (scripts/warm.sh), and checks nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
KUBE_VERSION=1.34.2
K8S_MODULE=k8s.io/kubernetes@v$KUBE_VERSION
K8S_SUM='h1:WQdDvYJazkmkwSncgNwGvVtaCt4TYXIU3wSMRgvp3MI='
PROM_MODULE=github.com/prometheus-operator/prometheus-operator@v0.85.0
PROM_SUM='h1:M5xLCLEoaW2IJfnuCwFzzpL+jSVQu3KGT84Pye+fW8s='
chart=deploy/helm/switchboard

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# moddir MODULE@VERSION SUM: download (checked against the Go checksum
# database) and print the module's directory, refusing a different sum.
moddir() {
  local json dir sum
  json="$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$1")"
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$json")"
  sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"$json")"
  if [[ "$sum" != "$2" || ! -d "$dir" ]]; then
    echo "helm-check: $1: sum $sum, want $2" >&2
    return 1
  fi
  echo "$dir"
}
k8s="$(moddir "$K8S_MODULE" "$K8S_SUM")"
prom="$(moddir "$PROM_MODULE" "$PROM_SUM")"
swagger="$k8s/api/openapi-spec/swagger.json"
crd="$prom/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"

echo "helm-check: building helm (tools/helm) and the checkers"
(cd tools/helm && go build -o "$tmp/helm" helm.sh/helm/v3/cmd/helm)
go build -o "$tmp/kubeschema" ./tools/kubeschema
go build -o "$tmp/switchboard" ./cmd/switchboard
if [[ ${1:-} == warm ]]; then
  exit 0
fi
"$tmp/helm" version --short

status=0
for values in "$chart"/ci/*-values.yaml; do
  name="$(basename "$values" -values.yaml)"
  echo "== $name ($values)"
  "$tmp/helm" lint --strict --kube-version "$KUBE_VERSION" -f "$values" "$chart" || status=1
  mkdir -p "$tmp/$name"
  if "$tmp/helm" template switchboard "$chart" --kube-version "$KUBE_VERSION" -f "$values" >"$tmp/$name/manifest.yaml"; then
    "$tmp/kubeschema" -swagger "$swagger" -crd "$crd" -configmap-dir "$tmp/$name" "$tmp/$name/manifest.yaml" || status=1
    # The ci/ values read these from Secrets in a cluster.
    ACME_KEY=ci-placeholder OPENAI_API_KEY=ci-placeholder \
      "$tmp/switchboard" validate --config "$tmp/$name/switchboard.yaml" >/dev/null || status=1
    # terminationGracePeriodSeconds must stay above server.drain_timeout.
    grace="$(sed -n 's/^ *terminationGracePeriodSeconds: *//p' "$tmp/$name/manifest.yaml")"
    drain="$(sed -n 's/^ *drain_timeout: *\([0-9]*\)s$/\1/p' "$tmp/$name/switchboard.yaml")"
    if [[ -z "$grace" || -z "$drain" || "$grace" -le "$drain" ]]; then
      echo "FAIL terminationGracePeriodSeconds ($grace) must be above drain_timeout (${drain}s)"
      status=1
    else
      echo "ok   terminationGracePeriodSeconds $grace > drain_timeout ${drain}s"
    fi
  else
    status=1
  fi
done
if [[ $status -ne 0 ]]; then
  echo "helm-check: FAILED"
  exit 1
fi
echo "helm-check: the chart passed lint and the schema check"
