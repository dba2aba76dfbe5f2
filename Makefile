# Switchboard's tasks. `make test` is the whole suite, exactly what CI runs.
GO ?= go
# A count, not a duration: with a duration, go1.26 sometimes fails a clean run
# with "context deadline exceeded" at the deadline (go.dev/issue/75804).
FUZZTIME ?= 20000x

.PHONY: run test check unit mcp-deps fuzz-short e2e browser screenshots tracing-e2e helm-check redis-scale flake bench bench-streams fuzz soak build docker redteam

# run: the gateway on its built-in offline demo (no network, no config).
run:
	$(GO) run ./cmd/switchboard serve

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/switchboard ./cmd/switchboard

# test: everything CI checks. Needs Redis on 127.0.0.1:6379, Node.js and
# Chromium (e2e/browser/run.sh installs Debian's when it is missing).
test: check unit fuzz-short e2e browser tracing-e2e helm-check redis-scale

check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "not gofmt-ed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff

unit: mcp-deps
	$(GO) test -race -count=1 ./...

# mcp-deps: the reference MCP server that tests/mcp runs against (npm ci).
mcp-deps:
	bash scripts/mcp-deps.sh

# fuzz-short: each fuzz target for FUZZTIME executions (seeds also run in `unit`).
fuzz-short:
	bash scripts/fuzz.sh $(FUZZTIME)

# fuzz: the same targets for a long time, by hand (make fuzz LONGFUZZ=30m).
fuzz:
	bash scripts/fuzz.sh $(or $(LONGFUZZ),5m)

# e2e: the official clients' suite on the memory store, then on Redis
# (sessions, approvals and stored responses live in the store).
e2e:
	bash e2e/run.sh
	SWITCHBOARD_STORE_URL=redis://127.0.0.1:6379/0 bash e2e/run.sh

# browser: the console (GET /console) in headless Chromium (Debian's
# chromium, installed when missing) against the built gateway, on the
# memory store and on Redis.
browser:
	bash e2e/browser/run.sh
	SWITCHBOARD_STORE_URL=redis://127.0.0.1:6379/0 bash e2e/browser/run.sh

# screenshots: rewrite the README's pictures of the console (docs/img/).
screenshots:
	bash e2e/browser/run.sh screenshots

tracing-e2e:
	bash scripts/tracing-e2e.sh

# helm-check: helm lint and a strict schema check of helm template for
# deploy/helm/switchboard, with Helm and the schemas pinned as Go modules.
helm-check:
	bash scripts/helm-check.sh

# flake: the e2e suite FLAKE_RUNS times (default 100) beside FLAKE_HOGS CPU
# hogs (default 2), by hand; it reports every failed run.
flake:
	bash scripts/flake.sh

# redis-scale: a local Redis Cluster and Sentinel setup on private ports,
# the store suite and a load with a master killed against each (about a
# minute); `make redis-scale-long` runs the longer load by hand.
redis-scale:
	bash scripts/redis-scale.sh short

redis-scale-long:
	bash scripts/redis-scale.sh long

bench:
	$(GO) run ./bench

# soak: two gateways, Redis paused and killed in turn under load, by hand
# (not in CI). SWITCHBOARD_SOAK_DURATION=10m makes it longer.
soak:
	SWITCHBOARD_SOAK=1 $(GO) test -race -count=1 -run Soak -timeout 30m -v ./tests/faults/

# bench-streams: thousands of slow streams held open at once through the
# gateway and a reverse proxy (about 5 minutes); writes its BENCHMARKS.md section.
bench-streams:
	$(GO) run ./bench -streams

docker:
	docker build -t switchboard .

# redteam: replay issue 23's findings against the built gateway with a
# hostile upstream (loopback only, bounded); by hand, not part of test.
redteam:
	bash scripts/redteam.sh
