# trainstep. `make test` is the one command that proves everything; .ci/run calls it.
#
# The test control plane (etcd, kube-apiserver, kube-controller-manager) and the engines' own
# binaries cannot be downloaded here: they are built from pinned Go modules into a cache outside
# the repo, once (about 5 minutes cold on 2 cores), and reused (0 s) afterwards.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -eu -o pipefail -c

export GOTOOLCHAIN := local
# nomsgpack: gin's MessagePack binding (github.com/ugorji/go/codec, 3 MB of code) is never used;
# without it each sidecar maps 1.2 MiB less of the binary (BenchmarkSidecarRSS).
# -dwarf=false, -w: no debug information is compiled or linked. Every binary that ships is stripped
# anyway (-s -w), and a test binary needs none for its stack traces (those come from the pclntab);
# compiling without it takes about 11% less CPU (client-go and apiextensions' clientset, cold:
# 116 s against 104 s of CPU) and linking a test binary a third less (test/conformance: 7.9 s
# against 5.3 s), which every cold build and every link of make test's 42 test binaries saves.
# lint, build and go test share these flags, so what one compiles the others reuse.
export GOFLAGS := -buildvcs=false -tags=nomsgpack -gcflags=all=-dwarf=false -ldflags=-w

K8S_VERSION    ?= 1.36.3
# The older Trainer release whose CRDs and runtimes the version-skew tests also run against.
TRAINER_OLD    ?= v2.1.0
CACHE_DIR      ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/trainstep
KUBEBUILDER_ASSETS ?= $(CACHE_DIR)/k8s/v$(K8S_VERSION)
export KUBEBUILDER_ASSETS

IMAGE ?= trainstep:dev
# benchstat, pinned: @latest may resolve to something else through the proxy.
BENCHSTAT_VERSION ?= v0.0.0-20260908200009-22c9c6c9d4da
# golangci-lint v2, pinned and run with `go run` like benchstat: its findings change between
# releases, so a version bump is a reviewed change with its fixes (.golangci.yml is the config).
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT := go run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
BIN   := bin/executor
# What `executor version` and the image's labels report: the release (VERSION=v0.3.0 for a
# release; else git describe) and the commit. The file VERSION is the release being prepared:
# every version the docs, the chart and the examples state of trainstep is made from it by `make
# generate`, and `make release` builds it unless VERSION= says another. GOFLAGS has -buildvcs=false, so the Go toolchain
# stamps neither; -X does (internal/version).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION_LDFLAGS := -X github.com/trainstep/trainstep/internal/version.version=$(VERSION) -X github.com/trainstep/trainstep/internal/version.commit=$(COMMIT)
# How long `make fuzz` runs each fuzz test; minimizing a new input is bounded too, or one slow
# minimization eats the whole budget.
FUZZTIME ?= 10s

# Each face adds its own asset targets (engine binaries) to TEST_ASSETS in hack/make/<face>.mk.
# Their targets come first in the file, so plain `make` would build Argo's binaries: say `all`.
.DEFAULT_GOAL := all
TEST_ASSETS := control-plane trainer-modules
include $(wildcard hack/make/*.mk)

.PHONY: all help build image release docker-image test test-suites test-go test-argov4 test-fuzz test-assets test-unit test-integration test-e2e bench fuzz soak lint generate verify control-plane trainer-modules clean mutation

all: build

# `make help` lists the targets that say what they are for (a `## ` comment after the
# prerequisites), in this file and hack/make/*.mk, in the order they are written.
help: ## this list
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_.-]+:[^#=]*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## the static executor binary the image ships
	CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $(VERSION_LDFLAGS)" -o $(BIN) ./cmd/executor

# The time of every file in the image: the commit's, so two builds of one commit have one digest.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
IMAGE_SOURCE ?= https://github.com/trainstep/trainstep
IMAGE_DIR ?= bin/image

image: ## the one image for all three faces, linux/amd64 + linux/arm64, no container engine: an OCI layout and docker-load tarballs in bin/image (internal/image)
	go run ./hack/image --out $(IMAGE_DIR) --image $(IMAGE) --version $(VERSION) --commit $(COMMIT) \
		--created $(SOURCE_DATE_EPOCH) --source $(IMAGE_SOURCE)

# Where a release's image is pushed; its install files name <repository>@<digest>.
RELEASE_REPOSITORY ?= ghcr.io/trainstep/trainstep

release: VERSION = $(shell cat VERSION)
release: ## dist/: install-argo.yaml and install-tekton.yaml (image pinned by digest), the chart (trainstep-<version>.tgz, the same image), the image (dist/image) and SHA256SUMS; VERSION: the file VERSION
	go run ./hack/release --out dist --version $(VERSION) --repository $(RELEASE_REPOSITORY) --commit $(COMMIT) \
		--created $(SOURCE_DATE_EPOCH) --source $(IMAGE_SOURCE)

docker-image: ## the same image with Docker, from the Dockerfile (needs a container engine and registry access)
	docker build -t $(IMAGE) .

# kube-scheduler is built here too, not by the real stack's own target: the two share most of
# k8s.io/kubernetes, and the real stack's builds then need not wait for the control plane's.
control-plane:
	bash hack/build-control-plane.sh "$(KUBEBUILDER_ASSETS)" $(K8S_VERSION) kube-controller-manager kube-scheduler

trainer-modules: ## the CRDs and runtimes of the older Trainer, for the version-skew tests
	go mod download github.com/kubeflow/trainer/v2@$(TRAINER_OLD)

test-assets: $(TEST_ASSETS)

# No separate `go vet`: golangci-lint's govet runs go vet's analyzers on the same packages.
lint: ## golangci-lint: go vet's analyzers, gofmt, goimports, staticcheck, errorlint, revive, gocritic, …
	$(GOLANGCI_LINT) run --allow-parallel-runners ./...

generate: ## regenerate every generated file (JSON Schema, Argo plugin ConfigMap, every version claim's block): internal/generate
	go run ./hack/generate

verify: ## fail when a generated file is stale, or a version claim outside the generated blocks disagrees with its source
	go run ./hack/generate -verify

# TEST_FUZZTIME bounds each fuzz test inside `make test` (a crash found becomes a testdata/fuzz
# entry, which plain `go test` then replays).
TEST_FUZZTIME ?= 5s

# `make test` runs what does not depend on each other side by side. One cold asset build keeps
# about 1.2 of the 2 cores busy (module downloads and links are serial), and a real-stack suite
# about 0.4 (its controllers mostly wait), so on 2 cores TEST_JOBS builds and TEST_PACKAGES test
# binaries at once finish sooner than one at a time; docs/testing.md has the figures. -Oline keeps
# each line of their output whole.
TEST_JOBS     ?= 4
TEST_PACKAGES ?= 4

# The platforms test/e2e/image builds the release for: linux/amd64, the one its suites run.
# Cross-compiling linux/arm64 is about 4 min of a cold run's CPU; make test-compat builds both.
TEST_IMAGE_PLATFORMS ?= linux/amd64

# make -j starts prerequisites in the order they are listed, and the suites wait for the last
# asset: the asset builds that take longest cold (each about 8 to 11 min side by side) start
# first, then lint (as long, and nothing waits for it), then the rest.
ASSETS_FIRST := $(foreach a,kueue-binaries realstack-binaries helm-binary,$(filter $(a),$(TEST_ASSETS)))

# What make test leaves to make test-compat, to keep a cold run well inside CI's 90 minutes:
# the arm64 image, the Argo v4 wire test (its own module: Argo v4 and its Kubernetes compiled
# once more) and fuzzing (every dependency of a fuzzed package compiled again, instrumented).
# The fuzz tests' seeds and every input fuzzing found (testdata/fuzz) still run in go test.
test: ## everything but what make test-compat adds: lint, unit, integration on a real apiserver, end to end, conformance
	$(MAKE) --no-print-directory -j$(TEST_JOBS) -Oline test-suites

# lint and verify run beside the suites, not before them: the suites wait only for what they
# start (the binary and the assets), so a cold lint no longer delays them. -vet=off: lint's govet
# runs go vet's analyzers on the same packages already.
test-suites: $(ASSETS_FIRST) lint test-go verify

test-go: build $(TEST_ASSETS)
	TRAINSTEP_IMAGE_PLATFORMS=$(TEST_IMAGE_PLATFORMS) go test -count=1 -vet=off -p $(TEST_PACKAGES) -timeout 30m ./...

# One corner of the compatibility matrix, run by make test-compat: the plugin's wire decoded
# with Argo v4's own types, the release most likely to drift from the v3 types it is built with. Its
# own module, so the main go.mod keeps one Argo major; no binary to build.
test-argov4:
	cd test/compat/argov4 && go test -count=1 ./...

test-fuzz:
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

test-unit: lint verify ## every package that needs no control plane (all but ./test/...)
	go test -count=1 $$(go list ./... | grep -v '/test/')

test-integration: test-assets
	go test -count=1 -timeout 20m ./internal/... ./test/integration/...

test-e2e: build test-assets
	go test -count=1 -timeout 20m ./test/e2e/...

bench: build test-assets ## every figure side by side in one run → docs/benchmarks.md (BENCH=sidebyside,sidecar,… picks sections)
	K8S_VERSION=$(K8S_VERSION) bash hack/bench.sh
	go run golang.org/x/perf/cmd/benchstat@$(BENCHSTAT_VERSION) bench.out

fuzz: ## each fuzz test for FUZZTIME; the checked-in seeds (testdata/fuzz) also run under plain go test
	go test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x ./core/step/
	go test -run '^$$' -fuzz '^FuzzPyLiteral$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x ./core/trainers/
	go test -run '^$$' -fuzz '^FuzzParseRequest$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x ./plugin/argo/
	go test -run '^$$' -fuzz '^FuzzSpecFromRun$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 200x ./plugin/tekton/

# make soak runs the lifecycle model checker (docs/testing.md) past what go test runs (10,000
# sequences, seeds 1 to 10,000): for SOAK_FOR or SOAK_SEQUENCES sequences, whichever ends first,
# from seed SOAK_SEED, a new one each run unless given; a violation prints the seed to replay.
SOAK_FOR       ?= 10m
SOAK_SEQUENCES ?= 1000000
SOAK_SEED      ?= $(shell date +%s)

soak: ## the lifecycle model checker for SOAK_FOR (10m) or SOAK_SEQUENCES sequences from seed SOAK_SEED
	LIFECYCLE_MODEL_FOR=$(SOAK_FOR) LIFECYCLE_MODEL_SEQUENCES=$(SOAK_SEQUENCES) LIFECYCLE_MODEL_SEED_BASE=$(SOAK_SEED) \
		go test -count=1 -timeout 0 -run '^TestLifecycleModel$$' -v ./core/lifecycle/

clean:
	rm -rf bin dist bench.out mutation.out mutation.out.summary

# go-gremlins, pinned as golangci-lint and benchstat are: its mutants change between releases.
GREMLINS_VERSION ?= v0.6.0
MUTATION_PACKAGES ?= core/stepcache core/lifecycle core/step core/trainjob

mutation: ## mutation testing (go-gremlins) of the core's packages with their fast tests → mutation.out; the figures are in docs/testing.md; not part of make test
	bash hack/mutation.sh $(GREMLINS_VERSION) $(MUTATION_PACKAGES)
