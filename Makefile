# Coxswain developer entry points. `make quickstart` runs the demo; `make test` is exactly what CI
# runs (.ci/run calls it). Tools are pinned and installed into .tools/bin with `go install`.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
# Gateway API v1.7.0 needs Go >= 1.27; machines start on their own Go and ignore go.mod's
# toolchain line, so every go command (and every script and test that make starts) takes the
# toolchain from the module proxy through this variable.
export GOTOOLCHAIN := go1.27.3

TOOLS := $(CURDIR)/.tools/bin
BIN := $(CURDIR)/bin

BUF_VERSION := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.0
GOLANGCI_LINT_VERSION := v2.15.0
CONTROLLER_GEN_VERSION := v0.23.0
HELM_VERSION := v3.22.0
# Let's Encrypt's ACME test server, for the automatic certificate tests (test/pebbletest).
PEBBLE_VERSION := v2.10.3
# HTTP/2 conformance tool, run against the real binary's HTTPS and h2c listeners (test/e2e).
# Its v2 tags have no /v2 module path, hence +incompatible.
H2SPEC_VERSION := v2.2.1+incompatible

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/coxswain-labs/coxswain/cmd/proxycmd.version=$(VERSION) \
	-X github.com/coxswain-labs/coxswain/cmd/proxycmd.commit=$(COMMIT)

# Quickstart: where the echo backends and the proxy listen (all loopback).
QUICKSTART_ECHO_ADDRS := app-v1=127.0.0.1:9001,app-v2=127.0.0.1:9002,web=127.0.0.1:9003
QUICKSTART_ADMIN := 127.0.0.1:9901

.PHONY: all build test helm chart-lint chart-test image test-deps vet lint generate generate-proto generate-k8s generate-check tools quickstart integration-env clean help

all: build

help:
	@echo "make build       build bin/coxswain, bin/coxswain-proxy (proxy-only) and bin/coxswain-build (docs/building.md)"
	@echo "make test        what CI runs: generate-check, build, vet, lint, integration env, go test -race ./..., examples, conformance"
	@echo "make conformance the upstream Gateway API conformance suite against the whole stack"
	@echo "make conformance-report  the same, publishing its report to conformance/reports/"
	@echo "make quickstart  run the quickstart (echo backends + coxswain serve -f examples/quickstart)"
	@echo "make lint        golangci-lint $(GOLANGCI_LINT_VERSION)"
	@echo "make fuzz        every go test -fuzz target for FUZZTIME each (default 1m; docs/reliability.md)"
	@echo "make generate    regenerate the snapshot IR protobuf code (buf), the API types' deepcopy and the CRDs (controller-gen)"
	@echo "make chart-test  the Helm charts: lint, template, server-side dry run against a real kube-apiserver, the RBAC as the controller"
	@echo "make image       build the container image with docker or podman (IMAGE=...)"
	@echo "make generate-check  fail when the controller-gen outputs in the tree are stale (part of make test)"

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/coxswain ./cmd/coxswain
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/coxswain-proxy ./cmd/coxswain-proxy
	$(GO) build -o $(BIN)/coxswain-build ./cmd/coxswain-build

# The one test command (README, CI). It installs what it needs: the pinned linter into .tools/bin,
# and the integration env's kube-apiserver + etcd into .cache/k8s-bin (reused when up to date).
# It first checks the controller-gen outputs are fresh (generate-check), runs the custom-filter
# example's own tests after the main module's, and ends with the conformance suite (see
# `conformance` below); its report stays in .cache/.
test: test-deps generate-check $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION) $(TOOLS)/helm-$(HELM_VERSION) $(TOOLS)/pebble-$(PEBBLE_VERSION) $(TOOLS)/h2spec-$(H2SPEC_VERSION)
	$(GO) build ./...
	$(GO) vet ./...
	$(TOOLS)/golangci-lint run ./...
	$(MAKE) chart-lint
	bash test/integration/env/build.sh
	$(GO) test -race -count=1 -timeout 30m ./...
	$(MAKE) test-examples
	bash test/conformance/run.sh

# The custom-filter example is its own Go module, so ./... above does not reach it.
.PHONY: test-examples
test-examples:
	cd examples/custom-filter && GOFLAGS=-mod=mod $(GO) vet ./... && GOFLAGS=-mod=mod $(GO) test -race -count=1 ./...

# Debian packages the tests use: iproute2 (`ip`) sets up the integration tests' private network
# namespace; redis-server backs the RateLimit filter's Global mode tests; curl runs
# examples/filters/try.sh; chromium (headless, driven by chromedp; chromium-driver comes with it)
# runs the operator console's browser tests (test/browser); nftables (`nft`) is the conformance
# harness's service proxy (test/conformance/serviceproxy). Installed only when missing (CI runs
# as root).
test-deps:
	@missing=""; \
	command -v ip >/dev/null || missing="$$missing iproute2"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v curl >/dev/null || missing="$$missing curl ca-certificates"; \
	command -v chromium >/dev/null || missing="$$missing chromium chromium-driver"; \
	command -v nft >/dev/null || missing="$$missing nftables"; \
	if [ -n "$$missing" ]; then apt-get update && apt-get install -y --no-install-recommends $$missing; fi

vet:
	$(GO) vet ./...

lint: $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION)
	$(TOOLS)/golangci-lint run ./...

integration-env:
	bash test/integration/env/build.sh

generate: generate-proto generate-k8s generate-chart

generate-proto: $(TOOLS)/buf-$(BUF_VERSION) $(TOOLS)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(TOOLS)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION)
	PATH="$(TOOLS):$$PATH" $(TOOLS)/buf generate

# Kubernetes API types -> deepcopy code and CRDs, with controller-gen: Coxswain's own
# gateway.coxswain-labs.dev group (modules/api -> deploy/crds) and the third-party example's
# (its own Go module, examples/custom-filter). Old CRDs are removed first, so a deleted kind's
# file does not linger.
CHART_GENERATED := 'charts/coxswain/crds' 'charts/coxswain-crds/files' ':(glob)charts/coxswain/dashboards/*.json'
K8S_GENERATED := ':(glob)**/zz_generated.deepcopy.go' 'deploy/crds/gateway.coxswain-labs.dev_*.yaml' \
	'examples/custom-filter/crds' $(CHART_GENERATED)
generate-k8s: $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
	rm -f deploy/crds/gateway.coxswain-labs.dev_*.yaml examples/custom-filter/crds/*.yaml
	$(TOOLS)/controller-gen object paths=./modules/api/...
	$(TOOLS)/controller-gen crd paths=./modules/api/... output:crd:artifacts:config=deploy/crds
	cd examples/custom-filter && GOFLAGS=-mod=mod $(TOOLS)/controller-gen object crd \
		paths=./api/... output:crd:artifacts:config=crds

# The Helm charts' copies of what deploy/ holds (Helm reads files inside a chart only): the
# coxswain chart's crds/ is deploy/crds (Gateway API standard channel + Coxswain's own), the
# coxswain-crds chart's files/ add the Gateway API module's experimental channel, and the
# dashboards are deploy/grafana/*.json where that exists. Byte copies, so the CRDs stay upstream's.
.PHONY: generate-chart
generate-chart: generate-k8s
	rm -rf charts/coxswain/crds charts/coxswain-crds/files
	rm -f charts/coxswain/dashboards/*.json
	mkdir -p charts/coxswain/crds charts/coxswain-crds/files/gateway-api/standard \
		charts/coxswain-crds/files/gateway-api/experimental charts/coxswain-crds/files/coxswain
	install -m 0644 deploy/crds/gateway.*.yaml charts/coxswain/crds/
	install -m 0644 deploy/crds/gateway.networking.k8s.io_*.yaml charts/coxswain-crds/files/gateway-api/standard/
	install -m 0644 deploy/crds/gateway.coxswain-labs.dev_*.yaml charts/coxswain-crds/files/coxswain/
	gwapi="$$($(GO) list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)" && \
		install -m 0644 "$$gwapi"/config/crd/experimental/gateway.*.yaml charts/coxswain-crds/files/gateway-api/experimental/
	if compgen -G 'deploy/grafana/*.json' >/dev/null; then install -m 0644 deploy/grafana/*.json charts/coxswain/dashboards/; fi

# Regenerates the controller-gen outputs into the tree and fails if that changed anything, so a
# type edited without `make generate` cannot pass CI (which runs on a clean checkout; locally,
# commit or stash your own edits to generated files first).
generate-check: generate-k8s generate-chart
	@if ! git diff --quiet -- $(K8S_GENERATED) || \
		[ -n "$$(git ls-files --others --exclude-standard -- $(K8S_GENERATED))" ]; then \
		echo "generate-check: the deepcopy code or CRDs are stale; run 'make generate' and commit:" >&2; \
		git status --short -- $(K8S_GENERATED) >&2; \
		git --no-pager diff --stat -- $(K8S_GENERATED) >&2; \
		exit 1; \
	fi

# The Helm charts (charts/, docs/install.md). chart-lint is quick and part of make test; the full
# check, chart-test, is Go integration tests that `go test ./...` in make test also runs: helm lint,
# helm template with the default and every ci/*-values.yaml, and a server-side dry run (dryRun=All)
# of every rendered object against the real kube-apiserver of test/integration/env, with zero
# warnings; then the controller runs with exactly the chart's RBAC.
CHART_TESTS := TestDeployManifests|TestCRDsChartExperimental|TestChartFlags|TestChartMonitors|TestChartProxyMounts
helm: $(TOOLS)/helm-$(HELM_VERSION)

chart-lint: $(TOOLS)/helm-$(HELM_VERSION)
	$(TOOLS)/helm lint --strict charts/coxswain charts/coxswain-crds
	for f in charts/coxswain/ci/*-values.yaml; do $(TOOLS)/helm lint --strict charts/coxswain -f "$$f"; done

chart-test: $(TOOLS)/helm-$(HELM_VERSION) integration-env
	$(GO) test -race -count=1 -run '^($(CHART_TESTS))$$' ./test/integration

# The container image (Dockerfile): for those with a container runtime; none is needed for make
# test. IMAGE names it; CONTAINER_RUNTIME is docker or podman (the first found).
IMAGE ?= ghcr.io/coxswain-labs/coxswain:$(VERSION)
CONTAINER_RUNTIME ?= $(shell command -v docker 2>/dev/null || command -v podman 2>/dev/null)
image:
	@if [ -z "$(CONTAINER_RUNTIME)" ]; then echo "make image: no docker or podman found (set CONTAINER_RUNTIME)" >&2; exit 1; fi
	$(CONTAINER_RUNTIME) build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

tools: $(TOOLS)/helm-$(HELM_VERSION) $(TOOLS)/pebble-$(PEBBLE_VERSION) $(TOOLS)/h2spec-$(H2SPEC_VERSION) $(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION) $(TOOLS)/buf-$(BUF_VERSION) \
	$(TOOLS)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION) $(TOOLS)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION) \
	$(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)

# Each tool has a version stamp next to it, so bumping a pin reinstalls it.
$(TOOLS)/golangci-lint-$(GOLANGCI_LINT_VERSION):
	GOBIN=$(TOOLS) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	touch $@

$(TOOLS)/helm-$(HELM_VERSION):
	GOBIN=$(TOOLS) $(GO) install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)
	touch $@

$(TOOLS)/pebble-$(PEBBLE_VERSION):
	GOBIN=$(TOOLS) $(GO) install github.com/letsencrypt/pebble/v2/cmd/pebble@$(PEBBLE_VERSION)
	touch $@

$(TOOLS)/h2spec-$(H2SPEC_VERSION):
	GOBIN=$(TOOLS) $(GO) install github.com/summerwind/h2spec/cmd/h2spec@$(H2SPEC_VERSION)
	touch $@

$(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION):
	GOBIN=$(TOOLS) $(GO) install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	touch $@

$(TOOLS)/buf-$(BUF_VERSION):
	GOBIN=$(TOOLS) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
	touch $@

$(TOOLS)/protoc-gen-go-$(PROTOC_GEN_GO_VERSION):
	GOBIN=$(TOOLS) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
	touch $@

$(TOOLS)/protoc-gen-go-grpc-$(PROTOC_GEN_GO_GRPC_VERSION):
	GOBIN=$(TOOLS) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
	touch $@

# The quickstart: build, start three echo backends, serve examples/quickstart, print what to try.
# Ctrl-C stops everything.
quickstart: build
	$(GO) build -o $(BIN)/quickstart-echo ./examples/quickstart/echo
	@$(BIN)/quickstart-echo -listen $(QUICKSTART_ECHO_ADDRS) & echo_pid=$$!; \
	trap 'kill $$echo_pid 2>/dev/null || true' EXIT INT TERM; \
	bash examples/quickstart/try.sh --wait $(QUICKSTART_ADMIN) & \
	$(BIN)/coxswain serve -f examples/quickstart --log-format console --admin-address $(QUICKSTART_ADMIN)

clean:
	rm -rf $(BIN)

# Every fuzz target (docs/reliability.md), one after the other, FUZZTIME each (go test -fuzztime:
# a duration or Nx). Seeds are in the tests and under each package's testdata/fuzz; a crasher the
# run finds is written there too, and the run stops at it. Pass more go test flags with FUZZ_ARGS,
# e.g. make fuzz FUZZTIME=10m FUZZ_ARGS=-parallel=1
FUZZTIME ?= 1m
FUZZ_ARGS ?=
FUZZ_TARGETS := \
	core/proxy/internal/h1server:FuzzH1Request core/proxy/internal/h1wire:FuzzH1Head \
	core/proxy/internal/h1server:FuzzH1ChunkedBody core/proxy/internal/h1wire:FuzzParseField \
	core/proxy:FuzzProxyProtocolHeader core/proxy/listener/internal/clienthello:FuzzPeekClientHello \
	controller/standalone:FuzzLoadManifest controller/standalone:FuzzSnapshot \
	modules/httproute:FuzzPathRegex modules/httproute:FuzzFirstQueryValue modules/httproute:FuzzQueryUnescapedEqual \
	modules/httproute:FuzzPrefixMatch modules/httproute/translate:FuzzParseDuration \
	modules/filters/sizelimit:FuzzParseSize modules/filters/ipaccess:FuzzParseList \
	modules/filters/jwtauth:FuzzJWT modules/filters/basicauth:FuzzParseHtpasswd core/accesslog:FuzzLineIsZapJSON \
	core/discovery/delta:FuzzApplyDelta
.PHONY: fuzz
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		echo "== $$name ($$pkg, $(FUZZTIME))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZ_ARGS) ./$$pkg/ || exit 1; \
	done

# Benchmarks side by side with nginx, HAProxy and Caddy (bench/README.md, docs/performance.md). It
# installs the peers and tools itself; pass runner flags with BENCH_ARGS, e.g.
#   make bench BENCH_ARGS="-bench b1 -runs 5 -duration 5s"
BENCH_ARGS ?=
.PHONY: bench
bench:
	bash bench/run.sh $(BENCH_ARGS)

# The upstream Gateway API conformance suite (sigs.k8s.io/gateway-api/conformance) against the
# whole stack, with no container runtime (test/conformance/run.sh): builds what is missing, runs
# the profiles and features the GatewayClass claims twice, on the Standard and on the Experimental
# channel CRDs, fails on any failed test. The reports stay in .cache/conformance/;
# `conformance-report` publishes them to conformance/reports/. Pass suite flags with
# CONFORMANCE_ARGS, and pick channels with CONFORMANCE_CHANNELS, e.g.
#   make conformance CONFORMANCE_ARGS="-run-test=HTTPRouteWeight"
#   make conformance CONFORMANCE_CHANNELS=experimental CONFORMANCE_ARGS="-run-test=GatewayListenerFilters"
CONFORMANCE_ARGS ?=
CONFORMANCE_CHANNELS ?= standard experimental
.PHONY: conformance
conformance:
	CONFORMANCE_CHANNELS="$(CONFORMANCE_CHANNELS)" bash test/conformance/run.sh $(CONFORMANCE_ARGS)

# A full conformance run whose reports (one per channel) replace the committed ones in
# conformance/reports/.
.PHONY: conformance-report
conformance-report:
	CONFORMANCE_PUBLISH=1 CONFORMANCE_CHANNELS="$(CONFORMANCE_CHANNELS)" bash test/conformance/run.sh
