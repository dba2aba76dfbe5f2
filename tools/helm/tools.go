//go:build tools

// Package helm pins the Helm CLI that `make helm-check` runs (helm lint and
// helm template of deploy/helm/switchboard). It lives in its own module so
// that Helm's Kubernetes dependency graph never touches the gateway's go.mod.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
