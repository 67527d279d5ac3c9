# coredns-mcs: `make demo` and `make test` are the two entry points (see README.md).
SHELL := /bin/bash
GO ?= go
# Every go command of every recipe, and every go a test or script spawns,
# runs Go 1.27.3, fetched as a toolchain module where the machine's Go is
# older (README.md, Two commands): its standard library has none of the
# vulnerabilities make vulncheck finds in older ones. go.mod asks for it too,
# so that a build with an older local Go fails rather than ships them.
export GOTOOLCHAIN := go1.27.3
# Short fuzz runs in `make test`; longer ones by hand: make test-fuzz FUZZTIME=10m
FUZZTIME ?= 15s

.PHONY: all build images pin-images test test-unit test-fuzz test-lab demo demo-prereqs bench generate

all: build

# Static, without cgo, as the images are (and CoreDNS's own releases): the
# two builds then share the compile cache.
# Each reports $(VERSION) (-version; kubectl mcs --version): the link step
# alone differs, so the compile cache is still shared.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/coredns-mcs ./cmd/coredns-mcs
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/mcs-controller ./cmd/mcs-controller
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/kubectl-mcs ./cmd/kubectl-mcs

# OCI image archives of both programs, _output/images/<name>.oci.tar, built
# without Docker on a base of their own (test/images, README "Images"). The
# same commit gives the same digests: every time in them is the commit's.
# VERSION is the release's tag on a tagged commit (the VERSION file's, which
# the charts and the overlays' image tags follow; docs/operations.md,
# Releases), else git describe's v0.1.0-3-gabc1234 after it, or the commit
# before the first tag.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REPO ?= registry.example.com/coredns-mcs
# Beside them, the kubectl plugin for the platforms operators run kubectl
# on, built as the images' binaries are (static, no build id).
PLUGIN_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
BUILD_IMAGES = SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) $(GO) run ./test/images -out _output/images \
	  -repo $(IMAGE_REPO) -version $(VERSION) -revision $$(git rev-parse HEAD)
images:
	$(BUILD_IMAGES)
	for p in $(PLUGIN_PLATFORMS); do \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -buildvcs=false \
	    -ldflags "-s -w -buildid= -X main.version=$(VERSION)" -o _output/images/kubectl-mcs-$${p%/*}-$${p#*/} ./cmd/kubectl-mcs || exit 1; \
	done

# A release's manifests: the images built again (the same digests), and
# deploy/overlays' images: set to them by digest, which a tag cannot be
# moved under (README.md, Images).
pin-images:
	$(BUILD_IMAGES) -pin deploy/overlays

# The deepcopy functions of api/ and the CRDs in deploy/crds, from the types
# (controller-gen), then the typed clientset (with its fake), listers and
# shared informers of api/client (client-gen, lister-gen, informer-gen); the
# generators are built from api/codegen/go.mod, and a unit test fails when
# anything they make is stale. The generated client trees are removed first
# so that nothing they no longer make survives.
MODULE := github.com/coredns-mcs/coredns-mcs
API_PKG := $(MODULE)/api
CLIENT_PKG := $(API_PKG)/client
CODEGEN_HEADER := api/codegen/boilerplate.go.txt
generate:
	$(GO) build -C api/codegen -o $(CURDIR)/_output/bin/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
	$(GO) build -C api/codegen -o $(CURDIR)/_output/bin/ k8s.io/code-generator/cmd/client-gen k8s.io/code-generator/cmd/lister-gen k8s.io/code-generator/cmd/informer-gen
	_output/bin/controller-gen object crd paths=./api/... output:crd:dir=deploy/crds
	rm -rf api/client/clientset api/client/listers api/client/informers
	_output/bin/client-gen --go-header-file $(CODEGEN_HEADER) --clientset-name versioned \
	  --input-base $(MODULE) --input api/v1alpha1 \
	  --output-dir api/client/clientset --output-pkg $(CLIENT_PKG)/clientset
	_output/bin/lister-gen --go-header-file $(CODEGEN_HEADER) \
	  --output-dir api/client/listers --output-pkg $(CLIENT_PKG)/listers $(API_PKG)/v1alpha1
	_output/bin/informer-gen --go-header-file $(CODEGEN_HEADER) \
	  --versioned-clientset-package $(CLIENT_PKG)/clientset/versioned --listers-package $(CLIENT_PKG)/listers \
	  --output-dir api/client/informers --output-pkg $(CLIENT_PKG)/informers $(API_PKG)/v1alpha1

# Unit tests first (no lab; promtool is built for them; the plugin's stack depth test without the race detector,
# which deepens every frame), govulncheck, then a short fuzz run of every fuzz target, then
# everything that needs the lab, one package at a time so they share one lab.
test: test-unit vulncheck test-fuzz test-lab

test-unit: promtool
	$(GO) vet ./...
	$(GO) vet -tags lab ./...
	cd test/lab && $(GO) vet ./...
	$(GO) test -race -count=1 ./...
	$(GO) test -count=1 -run '^TestAnswerPathDepth$$' ./plugin/mcs
	cd test/lab && $(GO) test -race -count=1 ./...

test-fuzz:
	GO=$(GO) bash test/fuzz.sh $(FUZZTIME)

test-lab: build lab-bins
	$(GO) test -race -count=1 -tags lab -p 1 -timeout 30m ./...

# The upstream MCS API conformance suite on the lab alone (test/conformance,
# docs/conformance.md); make test-lab runs it too. Its source is
# MCS_API_CONFORMANCE, else ../shared/mcs-api-conformance; its reports land
# in _output/conformance.
.PHONY: conformance
conformance: build lab-bins
	$(GO) test -count=1 -tags lab -timeout 30m -run '^TestConformance$$' -v ./test/conformance

# A seeded chaos run on the lab (test/chaos, docs/reliability.md): workload
# changes and overlapping faults drawn from SEED (default 47; "random" draws
# one and prints it), for DURATION (default 3m), with the FAULTS mix ("all",
# "none" or a comma-separated list); the report lands in _output/chaos.
# SEED=... make chaos replays a run's schedule exactly. SHARDS=N runs the
# controller with --shards N on N+1 replicas (same schedule).
.PHONY: chaos
chaos: build lab-bins
	CHAOS_SEED=$(SEED) CHAOS_DURATION=$(DURATION) CHAOS_FAULTS=$(FAULTS) CHAOS_SHARDS=$(SHARDS) $(GO) test -count=1 -tags lab -timeout 150m -run '^TestChaos$$' -v ./test/chaos

# The benchmarks of README.md, Performance (see test/bench/README.md):
# first the DNS ones, side by side on the lab's member3, printing a table of
# ratios (also in _output/bench/results.md); then propagation, with the
# real mcs-controller from member1 to member2's coredns-mcs at 1,000
# services (also in _output/bench/propagation.md); then the same at scale,
# 10,000 headless services from member1 into every member (member1 and
# member2), then member3 joining (_output/bench/scale.md). SCALE_FLAGS come last, so they override.
# A quick run: make bench BENCH_FLAGS='-services 1000 -duration 5s' PROP_FLAGS='-services 200 -changes 50' SCALE_FLAGS='-services 500'
SCALE := -services 10000 -consumers member2 -join member3 -headless -namespace mcs-scale -report scale.md \
  -converge-timeout 60m -burst-timeout 15m -timeout 120m -cleanup-timeout 40m
bench: build lab-up
	$(GO) run ./test/bench $(BENCH_FLAGS)
	$(GO) run ./test/bench/propagation $(PROP_FLAGS)
	$(GO) run ./test/bench/propagation $(SCALE) $(SCALE_FLAGS)

# The demo's story on the lab (test/demo, README "Two commands"): starts
# mcs-controller on the hub and a coredns-mcs per member, which keep running
# afterwards until make lab-down; running it again replaces them.
demo: demo-prereqs build lab-up
	$(GO) run ./test/demo

# Checked before make demo builds anything (test/demo/prereqs.sh).
demo-prereqs:
	@bash test/demo/prereqs.sh

# govulncheck on the module, offline, against the Go vulnerability database
# of test/vulncheck/go.mod's golang.org/x/vulndb (indexed once into
# _output/vulndb); fails on a vulnerability the code calls that
# test/vulncheck/accepted.txt does not accept with its reason.
.PHONY: vulncheck
vulncheck:
	cd test/vulncheck && $(GO) run . -db ../../_output/vulndb -accepted accepted.txt -C ../..

# promtool, which runs the alerts' unit tests (deploy/alerts_test.go), into
# _output/bin, once per test/promtool/go.mod (test/lab/build.sh).
.PHONY: promtool
promtool:
	bash test/lab/build.sh promtool

# The local lab (test/lab): four clusters of local processes on loopback.
# lab-bins builds etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kwok and labctl into _output/bin, once per test/lab/go.mod.
.PHONY: lab-bins lab-up lab-down lab-status

lab-bins:
	bash test/lab/build.sh

lab-up: lab-bins
	_output/bin/labctl up

# Needs no build: with no labctl there is no lab to stop. It also stops
# what make demo left running (recorded in _output/demo/run).
lab-down:
	@if [ -x _output/bin/labctl ]; then _output/bin/labctl down; else echo "no lab: _output/bin/labctl is not built"; fi

lab-status:
	_output/bin/labctl status
