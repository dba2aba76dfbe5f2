#!/usr/bin/env bash
# Installs the npm packages the MCP tests run against (tests/mcp/package.json:
# the reference server @modelcontextprotocol/server-everything, pinned), with
# npm ci, unless they are already there. `make unit` runs it first, so that
# tests/mcp runs for real in CI (where a missing server fails the tests
# rather than skipping them).
set -euo pipefail
cd "$(dirname "$0")/../tests/mcp"
command -v node >/dev/null || { echo "mcp-deps: node is not on PATH" >&2; exit 1; }
want="$(node -p 'require("./package.json").dependencies["@modelcontextprotocol/server-everything"]')"
have="$(node -p 'try { require("./node_modules/@modelcontextprotocol/server-everything/package.json").version } catch { "" }')"
if [[ "$have" != "$want" ]]; then
  echo "mcp-deps: installing tests/mcp node dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund
fi
